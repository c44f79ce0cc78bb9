// Package flowpb is netcube's subset of Hubble's flow API (the same
// package, names and field numbers as cilium's api/v1/flow), generated
// from api/hubble by `make proto`.
package flowpb
