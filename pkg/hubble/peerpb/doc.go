// Package peerpb is Hubble's Peer gRPC API (Notify, as cilium's
// api/v1/peer), generated from api/hubble by `make proto`.
package peerpb
