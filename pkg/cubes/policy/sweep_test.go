package policy

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestSweepKernelMaps: in the kernel's maps (the identity cache and the
// entries, each an exact hash and an LPM trie, and the endpoints), sweep
// deletes exactly the keys the tables do not hold: what was written for
// them stays, port ranges and IPv4 and IPv6 alike. What an agent from
// before the exact tables left in the tries for keys that now belong in
// those (a pod's address, a single port) goes too.
func TestSweepKernelMaps(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{})
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
	// An earlier agent's layout: the kept pod address and single port in
	// the tries.
	if err := cube.Put(m, MapPeers, datapath.PrefixFrom(netip.MustParsePrefix("10.0.0.1/32")), datapath.PolicyPeer{Identity: 300}); err != nil {
		t.Fatal(err)
	}
	if err := cube.Put(m, MapEntries, entryKey(Entry{RuleSet: firstRuleSet, Dir: Ingress, Proto: model.TCP, Peer: 300, Port: 8080, PortBits: 16}),
		datapath.PolicyEntry{Allow: 1}); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		for _, name := range []string{MapHosts, MapPeers, MapEndpoints, MapRules, MapEntries} {
			it := m.Map(name).Iterate()
			k, v := make([]byte, m.Map(name).KeySize()), make([]byte, m.Map(name).ValueSize())
			for it.Next(&k, &v) {
				n++
			}
		}
		return n
	}
	if n := count(); n != 13 {
		t.Fatalf("the maps hold %d keys, want 13 (7 kept, 4 left, 2 in an earlier layout)", n)
	}
	if removed, err := sweep(m, keep); err != nil || removed != 6 {
		t.Fatalf("sweep removed %d keys (err %v), want the 4 left and the 2 in an earlier layout", removed, err)
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
