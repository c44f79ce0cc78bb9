package datapath_test

import (
	"bytes"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/pkg/datapath"
)

func runOpts(in, out []byte) *ebpf.RunOptions {
	return &ebpf.RunOptions{Data: in, DataOut: out}
}

// runner is a program as the tests run it: an *ebpf.Program, or one
// wrapped (onUplink).
type runner interface {
	Run(*ebpf.RunOptions) (uint32, error)
}

// loMAC is the loopback device's MAC. BPF_PROG_RUN makes a tc program's
// skb on loopback when the context names no device, and sets its pkt_type
// as the receiving device would (eth_type_trans): a frame to any other
// unicast MAC comes in as another host's (PACKET_OTHERHOST), which from_net
// leaves to the kernel untouched.
var loMAC = [6]byte{}

// onUplink runs from_net on a frame as the uplink it is addressed to
// receives it: the tables address their frames to pkt.HostMAC, which on
// loopback (the uplink of these runs) would be another host's. A unicast
// frame is addressed to loopback for the run, and loopback's MAC, where the
// frame that comes out carries it (left as it was, or swapped into the
// source of an answer), reads back as the MAC the frame was addressed to.
// TestFramesForAnotherHost runs from_net on frames as they are.
type onUplink struct{ prog *ebpf.Program }

func (u onUplink) Run(opts *ebpf.RunOptions) (uint32, error) {
	in := opts.Data
	if len(in) < 12 || in[0]&1 != 0 { // too short, or broadcast or multicast: for every host
		return u.prog.Run(opts)
	}
	dst := [6]byte(in[:6])
	readdressed := bytes.Clone(in)
	copy(readdressed, loMAC[:])
	opts.Data = readdressed
	defer func() { opts.Data = in }()
	v, err := u.prog.Run(opts)
	out := opts.DataOut
	for off := 0; off <= 6 && off+6 <= len(out); off += 6 {
		if [6]byte(out[off:off+6]) == loMAC {
			copy(out[off:], dst[:])
		}
	}
	return v, err
}

// program is dp's program of that name, from_net on its uplink (onUplink).
func program(dp *datapath.Datapath, name string) runner {
	if name == "from_net" {
		return onUplink{dp.Program(name)}
	}
	return dp.Program(name)
}
