package bpftest

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
)

// harness runs bpf/test/headers.c's operations with BPF_PROG_RUN.
type harness struct {
	t    *testing.T
	objs bpfObjects
}

func load(t *testing.T) *harness {
	t.Helper()
	testenv.RequireRoot(t)
	h := &harness{t: t}
	if err := loadPrivate(&h.objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.objs.Close() })
	return h
}

// loadPrivate loads the object with none of its maps pinned: each test
// has its own.
func loadPrivate(objs *bpfObjects) error {
	spec, err := loadBpf()
	if err != nil {
		return err
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	return spec.LoadAndAssign(objs, nil)
}

// at sets the fake clock and the fake random number.
func (h *harness) at(nowNs uint64, random uint32) {
	h.t.Helper()
	if err := h.objs.FakeNowNs.Set(nowNs); err != nil {
		h.t.Fatal(err)
	}
	if err := h.objs.FakeRandomU32.Set(random); err != nil {
		h.t.Fatal(err)
	}
}

// do runs one operation and returns its outputs.
func (h *harness) do(io bpfTestIo) bpfTestIo {
	h.t.Helper()
	if err := h.objs.Io.Set(io); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.objs.Run.Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
		h.t.Fatal(err)
	}
	var out bpfTestIo
	if err := h.objs.Io.Get(&out); err != nil {
		h.t.Fatal(err)
	}
	if out.Ret == -1 {
		h.t.Fatalf("operation %d unknown to the program", io.Op)
	}
	return out
}

// addr is ip in the datapath's 16-byte form (the layouts are the same C
// struct in both objects).
func addr(ip netip.Addr) bpfNcAddr { return bpfNcAddr{W: datapath.AddrFrom(ip).W} }

// port is p in network byte order, as the maps hold it.
func port(p uint16) uint16 { return datapath.Port(p) }

// flowIO is an operation on the TCP flow src -> dst.
func flowIO(op bpfTestOp, src, dst netip.AddrPort) bpfTestIo {
	var io bpfTestIo
	io.Op = uint32(op)
	io.F.Saddr, io.F.Daddr = addr(src.Addr()), addr(dst.Addr())
	io.F.Sport, io.F.Dport = port(src.Port()), port(dst.Port())
	io.F.Proto = 6
	io.F.Family = 4
	if src.Addr().Is6() {
		io.F.Family = 6
	}
	return io
}

// toBackend sets the backend an operation is about.
func toBackend(io bpfTestIo, b netip.AddrPort) bpfTestIo {
	io.Baddr, io.Bport = addr(b.Addr()), port(b.Port())
	return io
}
