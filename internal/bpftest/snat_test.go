package bpftest

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

const (
	snatMin   = uint32(bpfSnatPortsSNAT_PORT_MIN)
	snatSpan  = uint32(bpfSnatPortsSNAT_PORT_SPAN)
	snatTries = uint32(bpfSnatPortsSNAT_TRIES)
)

// snatPort asks snat_port for a node port for src -> b.
func (h *harness) snatPort(src, b netip.AddrPort) uint32 {
	h.t.Helper()
	io := toBackend(flowIO(bpfTestOpOP_SNAT_PORT, src, frontend), b)
	io.SnatAddr = addr(nodeIP)
	return h.do(io).Result
}

// randomFor is the random number that makes snat_port start its search at
// port start for a client outside the range (snat.h: the start is the
// client's address and port mixed with a random number).
func randomFor(src netip.AddrPort, start uint32) uint32 {
	ip := src.Addr().As4()
	return binary.NativeEndian.Uint32(ip[:]) ^ uint32(port(src.Port())) ^ (start - snatMin)
}

// TestSNATPorts: the client's own port when it is in the range and free;
// otherwise a start chosen at random, then its neighbours (wrapping at the
// end of the range); none after SNAT_TRIES taken; ports are per backend.
func TestSNATPorts(t *testing.T) {
	h := load(t)
	last := snatMin + snatSpan - 1
	take := func(p uint32, b netip.AddrPort) { // a flow from some other client holds node port p
		t.Helper()
		other := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(p >> 8), byte(p)}), 1234)
		h.create(other, b, 1, netip.AddrPortFrom(nodeIP, uint16(p)))
	}

	inRange := netip.AddrPortFrom(client.Addr(), uint16(snatMin+10))
	if got := h.snatPort(inRange, backend); got != snatMin+10 {
		t.Errorf("client port %d in the range and free: got %d", snatMin+10, got)
	}
	h.at(0, randomFor(client, snatMin+100))
	if got := h.snatPort(client, backend); got != snatMin+100 {
		t.Fatalf("client port %d outside the range: got %d, want the random start %d", client.Port(), got, snatMin+100)
	}
	take(snatMin+100, backend)
	if got := h.snatPort(client, backend); got != snatMin+101 {
		t.Errorf("start taken: got %d, want the next port", got)
	}
	if got := h.snatPort(client, backend2); got != snatMin+100 {
		t.Errorf("towards another backend: got %d, want the start, free there", got)
	}

	h.at(0, randomFor(client, last))
	take(last, backend)
	if got := h.snatPort(client, backend); got != snatMin {
		t.Errorf("last port of the range taken: got %d, want the first (%d)", got, snatMin)
	}
	for p := snatMin; p < snatMin+snatTries-1; p++ { // with `last`, SNAT_TRIES ports in a row
		take(p, backend)
	}
	if got := h.snatPort(client, backend); got != 0 {
		t.Errorf("%d ports in a row taken: got %d, want none (0)", snatTries, got)
	}
}
