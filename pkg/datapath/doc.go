// Package datapath owns the netcube BPF object: it loads it, pins its maps
// and links under the bpffs root, attaches the programs (tcx on pod veths,
// cgroup hooks for socket-LB) and replaces them atomically on agent restart.
//
// It knows nothing about Services or Kubernetes: the cubes (package lb, ...)
// write the maps it exposes. The map layouts are defined once, in bpf/lib/*.h,
// and generated into Go by bpf2go (bpf_bpfel.go, committed).
package datapath
