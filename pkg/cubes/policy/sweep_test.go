package policy

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestSweepKernelMaps: in the kernel's maps (two LPM tries and a hash),
// sweep deletes exactly the keys the tables do not hold: what was
// written for them stays, port ranges and IPv4 and IPv6 alike.
func TestSweepKernelMaps(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := datapath.Load(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	m := dp.Maps()
	keep := &Tables{
		Peers: map[netip.Prefix]Identity{netip.MustParsePrefix("10.0.0.1/32"): 300, netip.MustParsePrefix("fd00::1/128"): 300,
			netip.MustParsePrefix("192.168.0.0/24"): 301},
		Endpoints: map[netip.Addr]Endpoint{netip.MustParseAddr("10.0.0.2"): {ID: 1, RuleSet: firstRuleSet, IsolatedIngress: true}},
		Entries: map[Entry]struct{}{
			{RuleSet: firstRuleSet, Dir: Ingress, Proto: model.TCP, Peer: 300, Port: 8080, PortBits: 16}: {},
			{RuleSet: firstRuleSet, Dir: Ingress, Proto: model.TCP, Peer: 301, Port: 1024, PortBits: 6}:  {},
			{RuleSet: firstRuleSet, Dir: Egress, Peer: AnyPeer}:                                          {},
		},
	}
	left := &Tables{
		Peers:     map[netip.Prefix]Identity{netip.MustParsePrefix("10.0.0.9/32"): 302, netip.MustParsePrefix("fd00::9/128"): 302},
		Endpoints: map[netip.Addr]Endpoint{netip.MustParseAddr("10.0.0.9"): {ID: 2, RuleSet: 2, IsolatedEgress: true}},
		Entries:   map[Entry]struct{}{{RuleSet: 2, Dir: Egress, Proto: model.UDP, Peer: 302, Port: 53, PortBits: 16}: {}},
	}
	for _, tb := range []*Tables{keep, left} {
		if err := Sync(m, nil, tb); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (n int) {
		for _, name := range []string{MapPeers, MapEndpoints, MapEntries} {
			it := m.Map(name).Iterate()
			k, v := make([]byte, m.Map(name).KeySize()), make([]byte, m.Map(name).ValueSize())
			for it.Next(&k, &v) {
				n++
			}
		}
		return n
	}
	if n := count(); n != 11 {
		t.Fatalf("the maps hold %d keys, want 11 (7 kept, 4 left)", n)
	}
	if removed, err := sweep(m, keep); err != nil || removed != 4 {
		t.Fatalf("sweep removed %d keys (err %v), want the 4 left", removed, err)
	}
	if n := count(); n != 7 {
		t.Errorf("after the sweep the maps hold %d keys, want the 7 kept", n)
	}
	if ok, err := MapsAllow(m, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), model.TCP, 8080); err != nil || !ok {
		t.Errorf("a kept rule no longer allows: %v %v", ok, err)
	}
	if _, ok, err := cube.Get[datapath.Addr, datapath.PolicyEndpoint](m, MapEndpoints, datapath.AddrFrom(netip.MustParseAddr("10.0.0.9"))); ok || err != nil {
		t.Errorf("the left endpoint: found %v, err %v", ok, err)
	}
}
