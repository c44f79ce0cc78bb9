package datapath_test

import "github.com/cilium/ebpf"

func runOpts(in, out []byte) *ebpf.RunOptions {
	return &ebpf.RunOptions{Data: in, DataOut: out}
}
