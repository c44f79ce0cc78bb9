package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestSessionAffinity: with sessionAffinity ClientIP, every new flow of a
// client goes to the backend its first one got, while the affinity has not
// expired and the backend is still the Service's; other clients are
// balanced on their own.
func TestSessionAffinity(t *testing.T) {
	dp, cube := load(t)
	fe := frontend(vip4, model.TCP)
	apply := func(affinity uint32, bs ...netip.AddrPort) {
		t.Helper()
		if err := cube.Apply(model.FrontendBackends{Frontend: fe, Affinity: affinity, Backends: backends(bs...)}); err != nil {
			t.Fatal(err)
		}
	}
	flowFrom := func(client netip.Addr, port uint16) netip.AddrPort {
		return backendOf(t, dp, netip.AddrPortFrom(client, port), vip4, be4, be4b)
	}
	apply(60, be4, be4b)

	stuck := flowFrom(client4.Addr(), 1000)
	for port := uint16(1001); port < 1033; port++ {
		if got := flowFrom(client4.Addr(), port); got != stuck {
			t.Fatalf("flow %d went to %v; the client's first went to %v", port, got, stuck)
		}
	}
	// Other clients are balanced, each then stuck to its own choice.
	seen := map[netip.AddrPort]bool{}
	for i := range 32 {
		other := netip.AddrFrom4([4]byte{10, 244, 3, byte(i + 1)})
		first := flowFrom(other, 2000)
		if flowFrom(other, 2001) != first {
			t.Fatalf("client %s moved between its first two flows", other)
		}
		seen[first] = true
	}
	if len(seen) != 2 {
		t.Errorf("32 clients all went to %v; want both backends used", seen)
	}

	// An expired affinity is chosen afresh (32 tries: both backends).
	aff := dp.Maps().Map(lb.MapAffinity)
	key := datapath.AffinityKey{Client: datapath.AddrFrom(client4.Addr()), RevNatId: revNATOf(t, dp, fe)}
	seen = map[netip.AddrPort]bool{}
	for i := range 32 {
		var v datapath.AffinityValue
		if err := aff.Lookup(key, &v); err != nil {
			t.Fatal(err)
		}
		v.LastNs = 1 // long ago
		if err := aff.Update(key, v); err != nil {
			t.Fatal(err)
		}
		seen[flowFrom(client4.Addr(), uint16(3000+i))] = true
	}
	if len(seen) != 2 {
		t.Errorf("after expiry the client always went to %v", seen)
	}

	// A backend leaving the Service is no longer stuck to.
	stuck = flowFrom(client4.Addr(), 4000)
	remaining := be4
	if stuck == be4 {
		remaining = be4b
	}
	apply(60, remaining)
	if got := backendOf(t, dp, netip.AddrPortFrom(client4.Addr(), 4001), vip4, be4, be4b); got != remaining {
		t.Errorf("stuck to %v after it left the Service", got)
	}
	// Without affinity nothing is remembered.
	apply(0, be4, be4b)
	if n := countEntries(t, dp, lb.MapAffinityMatch); n != 0 {
		t.Errorf("%d affinity match entries left after affinity was turned off", n)
	}
}

func revNATOf(t *testing.T, dp *datapath.Datapath, fe model.Frontend) uint32 {
	t.Helper()
	var v datapath.ServiceValue
	k := datapath.ServiceKey{Addr: datapath.AddrFrom(fe.Addr), Port: datapath.Port(fe.Port), Proto: uint8(fe.Proto)}
	if err := dp.Maps().Map(lb.MapServices).Lookup(k, &v); err != nil {
		t.Fatal(err)
	}
	return v.RevNatId
}

// countEntries is the number of entries of a map of dp.
func countEntries(t *testing.T, dp *datapath.Datapath, name string) int {
	t.Helper()
	n := 0
	var k, v []byte
	it := dp.Maps().Map(name).Iterate()
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
