package model

import (
	"net/netip"
	"slices"
	"testing"
	"unsafe"
)

// TestServiceCompact: a Service keeps its ClusterIPs in place and shares
// a single-port list with every other Service that has the same one, so
// that most Services are one 112-byte object (100,000 of them are most of
// an agent's memory).
func TestServiceCompact(t *testing.T) {
	if n := unsafe.Sizeof(Service{}); n > 112 {
		t.Errorf("Service takes %d bytes, want at most 112 (a size class)", n)
	}

	v4, v6 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:10:96::a")
	for _, c := range []struct {
		set, want []netip.Addr
	}{
		{[]netip.Addr{v4}, []netip.Addr{v4}},
		{[]netip.Addr{v6, v4}, []netip.Addr{v6, v4}},
		{[]netip.Addr{{}, v4}, []netip.Addr{v4}}, // an invalid one is not kept
		{[]netip.Addr{v4, v6, netip.MustParseAddr("10.96.0.11")}, []netip.Addr{v4, v6}},
		{nil, nil},
	} {
		var s Service
		s.SetClusterIPs([]netip.Addr{netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("fd00::1")}) // replaced
		if kept := s.SetClusterIPs(c.set); kept != len(c.want) || !slices.Equal(s.ClusterIPs(), c.want) {
			t.Errorf("SetClusterIPs(%v): kept %d, ClusterIPs %v; want %v", c.set, kept, s.ClusterIPs(), c.want)
		}
	}

	http := []ServicePort{{Name: "http", Port: 80, Proto: TCP}}
	var a, b, own, two, none Service
	a.SetPorts(slices.Clone(http))
	b.SetPorts(slices.Clone(http))
	own.SetPorts([]ServicePort{{Name: "http", Port: 80, NodePort: 30080, Proto: TCP}})
	two.SetPorts([]ServicePort{http[0], {Name: "dns", Port: 53, Proto: UDP}})
	none.SetPorts(nil)
	if !slices.Equal(a.Ports(), http) || !slices.Equal(b.Ports(), http) || len(two.Ports()) != 2 || own.Ports()[0].NodePort != 30080 {
		t.Fatalf("ports %v %v %v %v, want %v each, with a NodePort, and two", a.Ports(), b.Ports(), own.Ports(), two.Ports(), http)
	}
	if a.ports != b.ports {
		t.Errorf("two Services with port %v keep a list each, want one shared", http)
	}
	if own.ports == a.ports || own.Ports()[0] == a.Ports()[0] {
		t.Errorf("a NodePort's list is shared, want its Service's own")
	}
	if none.Ports() != nil || none.ports != nil {
		t.Errorf("no ports: %v, want none and no list", none.Ports())
	}
}
