// Package observerpb is netcube's subset of Hubble's Observer gRPC API
// (GetFlows, ServerStatus, as cilium's api/v1/observer), generated from
// api/hubble by `make proto`.
package observerpb
