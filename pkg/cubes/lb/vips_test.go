package lb

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// vipsIn reads lb_vips: the addresses it lists, sorted.
func vipsIn(t *testing.T, m *cube.Maps) []string {
	t.Helper()
	var out []string
	var a datapath.Addr
	var v uint8
	it := m.Map(MapVIPs).Iterate()
	for it.Next(&a, &v) {
		out = append(out, a.IP().String())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestVIPsListClusterIPsOnly: lb_vips lists an address while a ClusterIP
// frontend has it (two ports of one Service: one entry, kept until the
// last goes), never a NodePort's or an ExternalIP's (External frontends);
// a frontend that becomes External leaves it. Batched (a full sync) and
// one by one write the same. A restore keeps what the frontends hold,
// deletes an entry none holds and writes one missing.
func TestVIPsListClusterIPsOnly(t *testing.T) {
	maps := newMaps(t, nil)
	c := New(maps)
	bs := []model.Backend{be("10.244.1.5:8080")}
	tcp, udp := fe("10.96.0.10", 53, model.TCP), fe("10.96.0.10", 53, model.UDP)
	v6 := fe("fd00:10:96::10", 53, model.UDP)
	nodePort := fe("192.168.1.2", 30053, model.UDP)
	extIP := fe("198.51.100.7", 53, model.UDP)

	if err := c.UpsertAll([]model.FrontendBackends{
		{Frontend: tcp, Backends: bs}, {Frontend: udp, Backends: bs}, {Frontend: nodePort, Flags: model.External, Backends: bs},
	}); err != nil {
		t.Fatal(err)
	}
	apply := func(fb model.FrontendBackends) {
		t.Helper()
		if err := c.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	apply(model.FrontendBackends{Frontend: v6, Backends: bs})
	apply(model.FrontendBackends{Frontend: extIP, Flags: model.External | model.Local})
	want := func(what string, addrs ...string) {
		t.Helper()
		if got := vipsIn(t, maps); !slices.Equal(got, addrs) {
			t.Errorf("%s: lb_vips %v, want %v", what, got, addrs)
		}
		if n := c.Entries()[MapVIPs]; n != len(addrs) {
			t.Errorf("%s: the cube counts %d entries in lb_vips, want %d", what, n, len(addrs))
		}
	}
	want("ClusterIPs, a NodePort and an ExternalIP", "10.96.0.10", "fd00:10:96::10")

	if err := c.Delete(tcp); err != nil {
		t.Fatal(err)
	}
	want("one of two ports deleted", "10.96.0.10", "fd00:10:96::10")
	if err := c.Delete(udp); err != nil {
		t.Fatal(err)
	}
	want("both deleted", "fd00:10:96::10")
	apply(model.FrontendBackends{Frontend: v6, Flags: model.External, Backends: bs})
	want("the IPv6 frontend now External", []string{}...)
	apply(model.FrontendBackends{Frontend: v6, Backends: bs})
	want("a ClusterIP again", "fd00:10:96::10")

	// A restore over maps an agent left with a stale entry and without
	// one it needs.
	if err := cube.Put(maps, MapVIPs, datapath.AddrFrom(netip.MustParseAddr("10.96.9.9")), uint8(1)); err != nil {
		t.Fatal(err)
	}
	if err := cube.Remove(maps, MapVIPs, datapath.AddrFrom(v6.Addr)); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(maps)
	if err != nil {
		t.Fatal(err)
	}
	c = r
	want("restored", "fd00:10:96::10")
	if err := c.Delete(v6); err != nil {
		t.Fatal(err)
	}
	want("the restored frontend deleted", []string{}...)
}
