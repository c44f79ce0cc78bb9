package model

import (
	"net/netip"
	"testing"
	"unsafe"
)

// TestEndpointCompact: a slice's endpoints keep their addresses (an
// IPv4-mapped IPv6 address stays IPv6) and placements, in 12 bytes each;
// a slice itself (two per dual-stack Service) takes 64 bytes with its
// change's trigger time.
func TestEndpointCompact(t *testing.T) {
	if n := unsafe.Sizeof(Endpoint{}); n != 12 {
		t.Errorf("Endpoint takes %d bytes, want 12", n)
	}
	if n := unsafe.Sizeof(EndpointSlice{}); n > 64 {
		t.Errorf("EndpointSlice takes %d bytes, want at most 64 (a size class; two per dual-stack Service)", n)
	}
	for _, c := range []struct {
		v6    bool
		addrs []string
	}{
		{false, []string{"10.0.0.1", "255.255.255.255", "0.0.0.1"}},
		{true, []string{"fd00::1", "::ffff:10.0.0.1", "2001:db8::ff"}},
	} {
		s := NewEndpointSlice("", c.v6)
		if s.IPv6() != c.v6 {
			t.Errorf("IPv6() = %v, want %v", s.IPv6(), c.v6)
		}
		s.Reserve(len(c.addrs))
		for _, a := range c.addrs {
			s.Add(netip.MustParseAddr(a), Placement{}).Ready = true
		}
		for i, a := range c.addrs {
			e := &s.Endpoints[i]
			if got := s.Addr(e); got != netip.MustParseAddr(a) || e.Placement() != nil || e.NodeName() != "" || !e.Ready {
				t.Errorf("endpoint %d at %s (ready %v, placement %v), want %s", i, got, e.Ready, e.Placement(), a)
			}
		}
	}
	p := Placement{NodeName: "n1", ForZones: "a,b"}
	s := &EndpointSlice{}
	e1, e2 := *s.Add(netip.MustParseAddr("10.0.0.1"), p), *s.Add(netip.MustParseAddr("10.0.0.2"), p)
	if e1.Placement() != e2.Placement() || *e1.Placement() != p || !e1.HintedFor("b") || e1.HintedFor("c") {
		t.Errorf("placements %p %+v, %p: want one shared %+v", e1.Placement(), e1.Placement(), e2.Placement(), p)
	}
	if e3 := s.Add(netip.MustParseAddr("10.0.0.3"), Placement{NodeName: "n2"}); e3.NodeName() != "n2" || e1.NodeName() != "n1" {
		t.Errorf("nodes %q, %q", e1.NodeName(), e3.NodeName())
	}
}
