package model

import (
	"net/netip"
	"testing"
	"unsafe"
)

// TestEndpointCompact: an endpoint keeps its address (an IPv4-mapped IPv6
// address stays IPv6) and its placement, in 24 bytes.
func TestEndpointCompact(t *testing.T) {
	if n := unsafe.Sizeof(Endpoint{}); n != 24 {
		t.Errorf("Endpoint takes %d bytes, want 24", n)
	}
	for _, a := range []string{"10.0.0.1", "fd00::1", "::ffff:10.0.0.1"} {
		addr := netip.MustParseAddr(a)
		e := NewEndpoint(addr, Placement{})
		if e.Addr() != addr || e.Placement() != nil || e.NodeName() != "" {
			t.Errorf("%s: endpoint at %s, placement %v", a, e.Addr(), e.Placement())
		}
	}
	p := Placement{NodeName: "n1", ForZones: "a,b"}
	e1, e2 := NewEndpoint(netip.MustParseAddr("10.0.0.1"), p), NewEndpoint(netip.MustParseAddr("10.0.0.2"), p)
	if e1.Placement() != e2.Placement() || *e1.Placement() != p || !e1.HintedFor("b") || e1.HintedFor("c") {
		t.Errorf("placements %p %+v, %p: want one shared %+v", e1.Placement(), e1.Placement(), e2.Placement(), p)
	}
	if e3 := NewEndpoint(netip.MustParseAddr("10.0.0.3"), Placement{NodeName: "n2"}); e3.NodeName() != "n2" || e1.NodeName() != "n1" {
		t.Errorf("nodes %q, %q", e1.NodeName(), e3.NodeName())
	}
}
