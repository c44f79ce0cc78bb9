// Package traffic is the real traffic that runs inside sandbox pods: a
// TCP+UDP server that answers every request with its pod name, a client that
// says which backend answered each request, and the request/response and
// connection-rate generators of the benchmarks. It knows nothing about
// netcube's datapath: it measures it from the outside, like any application.
package traffic
