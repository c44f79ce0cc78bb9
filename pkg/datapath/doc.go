// Package datapath owns the netcube BPF object: it loads it, sizes and pins
// its maps (as the registered cubes declare them), hands each cube its own
// maps, attaches the entry programs (tcx on node uplinks, tc filters on
// pod veths, cgroup hooks for socket-LB) and replaces them atomically on
// agent restart.
//
// It knows nothing about Services or Kubernetes: the cubes (pkg/cubes/...)
// decide what the maps hold. The map layouts are defined once, in
// bpf/cubes/*/*_maps.h, and generated into Go by bpf2go (bpf_bpfel.go,
// committed; types.go exports them).
package datapath
