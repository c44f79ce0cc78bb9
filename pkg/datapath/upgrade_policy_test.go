package datapath_test

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestUpgradeCarriesPolicyEndpointsOver: an agent before rule sets pinned
// pol_endpoints with 8-byte values (a pod's number and flags) and filed
// its entries under the pod's number. The agent after it carries each
// endpoint over with the pod's number as its rule set, so the pod is
// judged by the same rules across the restart: what was allowed still
// is, and what was not still is not.
func TestUpgradeCarriesPolicyEndpointsOver(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.EnsureBPFFS(t)
	pins := filepath.Join(datapath.BPFFS, testenv.Name("netcube-test-upgrade-policy-"))
	t.Cleanup(func() {
		if err := datapath.Unpin(pins); err != nil {
			t.Error(err)
		}
	})
	cfg := datapath.Config{PinDir: pins, Cubes: cubes.All, MapSizes: map[string]uint32{
		"lb_services": 1024, "lb_backends": 1024, "lb_revnat": 1024, "ct_flows": 1024}}
	server, client := netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.2.1")
	allowed := func(m *cube.Maps, port uint16) bool {
		t.Helper()
		ok, err := policy.MapsAllow(m, client, server, model.TCP, port)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	// The earlier agent's maps: the server isolated, the client's identity
	// allowed on port 80, the entry under the server's number 7.
	dp, err := loadTrusting(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := dp.Maps()
	if err := policy.SyncChanges(m, &policy.Tables{
		Peers:     map[netip.Prefix]policy.Identity{netip.PrefixFrom(client, 32): 300},
		Endpoints: map[netip.Addr]policy.Endpoint{server: {ID: 7, RuleSet: 7, IsolatedIngress: true}},
		Entries:   map[policy.Entry]struct{}{{RuleSet: 7, Dir: policy.Ingress, Proto: model.TCP, Peer: 300, Port: 80, PortBits: 16}: {}},
	}, policy.Changes{Peers: map[netip.Prefix]struct{}{netip.PrefixFrom(client, 32): {}},
		Endpoints: map[netip.Addr]struct{}{server: {}},
		Entries:   map[policy.Entry]struct{}{{RuleSet: 7, Dir: policy.Ingress, Proto: model.TCP, Peer: 300, Port: 80, PortBits: 16}: {}}}); err != nil {
		t.Fatal(err)
	}
	if !allowed(m, 80) || allowed(m, 81) {
		t.Fatal("before the upgrade: want port 80 allowed and 81 not") // the controls
	}
	dp.Close()

	// ... whose pol_endpoints had the 8-byte values.
	path := filepath.Join(pins, policy.MapEndpoints)
	cur, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	maxEntries := cur.MaxEntries()
	if err := cur.Unpin(); err != nil {
		t.Fatal(err)
	}
	cur.Close()
	old, err := ebpf.NewMap(&ebpf.MapSpec{Name: policy.MapEndpoints, Type: ebpf.Hash, KeySize: 16, ValueSize: 8, MaxEntries: maxEntries,
		Flags: 1 /* BPF_F_NO_PREALLOC, as pol_endpoints */})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Put(datapath.AddrFrom(server), [8]byte{7, 0, 0, 0, byte(datapath.IsolatedIngress)}); err != nil {
		t.Fatal(err)
	}
	if err := old.Pin(path); err != nil {
		t.Fatal(err)
	}
	old.Close()

	dp, err = loadTrusting(cfg)
	if err != nil {
		t.Fatalf("the agent after rule sets did not start over the earlier pins: %v", err)
	}
	defer dp.Close()
	m = dp.Maps()
	ep, ok, err := cube.Get[datapath.Addr, datapath.PolicyEndpoint](m, policy.MapEndpoints, datapath.AddrFrom(server))
	if err != nil || !ok || ep.Id != 7 || ep.RuleSet != 7 || ep.Flags != datapath.IsolatedIngress {
		t.Fatalf("the server's endpoint carried over as %+v (found %v, err %v), want number 7, rule set 7, isolated ingress", ep, ok, err)
	}
	if !allowed(m, 80) || allowed(m, 81) {
		t.Error("after the upgrade: want port 80 still allowed and 81 still not")
	}
}
