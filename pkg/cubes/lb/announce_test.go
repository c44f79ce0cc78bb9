package lb

import (
	"fmt"
	"slices"
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// announcedIn reads lb_announce as "ifindex address mac" lines, sorted.
func announcedIn(t *testing.T, m *cube.Maps) []string {
	t.Helper()
	var out []string
	var k datapath.AnnounceKey
	var v datapath.AnnounceValue
	it := m.Map(MapAnnounce).Iterate()
	for it.Next(&k, &v) {
		out = append(out, fmt.Sprintf("%d %s %x", k.Ifindex, k.Addr.IP(), v.Mac))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestAnnounceFollowsFrontends: lb_announce lists a LoadBalancer IP on
// every uplink, with that uplink's MAC, while a frontend with the Announce
// flag has it (two ports: one entry per uplink, kept until the last goes);
// a frontend losing the flag (Local, its last local endpoint gone) takes
// it out. A restarted agent (Restore, then SetUplinks) keeps what the
// frontends hold, deletes a stale entry (an address no frontend has, an
// interface no longer an uplink) and writes a missing one.
func TestAnnounceFollowsFrontends(t *testing.T) {
	maps := newMaps(t, nil)
	c := New(maps)
	ups := []Uplink{{Ifindex: 2, MAC: [6]byte{2, 0, 0, 0, 0, 2}}, {Ifindex: 3, MAC: [6]byte{2, 0, 0, 0, 0, 3}}}
	if err := c.SetUplinks(ups); err != nil {
		t.Fatal(err)
	}
	bs := []model.Backend{be("10.244.1.5:8080")}
	http, https := fe("198.51.100.7", 80, model.TCP), fe("198.51.100.7", 443, model.TCP)
	v6 := fe("2001:db8::7", 80, model.TCP)
	nodePort := fe("192.168.1.2", 30080, model.TCP)
	ann := model.External | model.Announce
	apply := func(fb model.FrontendBackends) {
		t.Helper()
		if err := c.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, lines ...string) {
		t.Helper()
		if got := announcedIn(t, maps); !slices.Equal(got, lines) {
			t.Errorf("%s: lb_announce %q, want %q", what, got, lines)
		}
		if n := c.Entries()[MapAnnounce]; n != len(lines) {
			t.Errorf("%s: the cube counts %d entries in lb_announce, want %d", what, n, len(lines))
		}
	}
	apply(model.FrontendBackends{Frontend: nodePort, Flags: model.External, Backends: bs})
	want("a NodePort only: nothing to announce")
	apply(model.FrontendBackends{Frontend: http, Flags: ann, Backends: bs})
	apply(model.FrontendBackends{Frontend: https, Flags: ann, Backends: bs})
	apply(model.FrontendBackends{Frontend: v6, Flags: ann, Backends: bs})
	want("two ports of an IPv4 LoadBalancer IP and an IPv6 one",
		"2 198.51.100.7 020000000002", "2 2001:db8::7 020000000002", "3 198.51.100.7 020000000003", "3 2001:db8::7 020000000003")
	if err := c.Delete(http); err != nil {
		t.Fatal(err)
	}
	want("one of two ports deleted",
		"2 198.51.100.7 020000000002", "2 2001:db8::7 020000000002", "3 198.51.100.7 020000000003", "3 2001:db8::7 020000000003")
	apply(model.FrontendBackends{Frontend: v6, Flags: model.External | model.Local})
	want("IPv6: Local, no local endpoint left, the flag gone", "2 198.51.100.7 020000000002", "3 198.51.100.7 020000000003")

	// A restart: a stale address, an interface that is no longer an
	// uplink, and a missing entry.
	for _, k := range []datapath.AnnounceKey{
		{Ifindex: 2, Addr: datapath.AddrFrom(v6.Addr)},
		{Ifindex: 9, Addr: datapath.AddrFrom(https.Addr)},
	} {
		if err := cube.Put(maps, MapAnnounce, k, datapath.AnnounceValue{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cube.Remove(maps, MapAnnounce, datapath.AnnounceKey{Ifindex: 3, Addr: datapath.AddrFrom(https.Addr)}); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(maps)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetUplinks(ups); err != nil {
		t.Fatal(err)
	}
	c = r
	want("restored", "2 198.51.100.7 020000000002", "3 198.51.100.7 020000000003")
	if err := c.Delete(https); err != nil {
		t.Fatal(err)
	}
	want("the restored frontend deleted")
}
