// Package model is netcube's Kubernetes-agnostic desired state: frontends
// (a Service address, port and protocol) and the backends that serve them.
// Sources (YAML directory, Kubernetes API) translate into it; cubes program
// the datapath from it. It owns no state but tables of values that many
// objects share (placement.go, ports.go), and touches no map.
package model
