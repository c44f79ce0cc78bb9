package lb

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// newMaps returns the cube's maps in memory (package cubetest): cube
// logic needs no kernel; the datapath's tests run these maps for real.
func newMaps(t *testing.T, sizes map[string]uint32) *cube.Maps {
	t.Helper()
	return cubetest.New(t, sizes, Cube{}).Maps
}

func testFrontend(i int) model.Frontend {
	return model.Frontend{Addr: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Proto: model.TCP}
}

func backendsN(n, offset int) []model.Backend {
	var out []model.Backend
	for i := range n {
		out = append(out, model.Backend{Addr: netip.AddrFrom4([4]byte{10, 244, byte((i + offset) >> 8), byte(i + offset)}), Port: 8080})
	}
	return out
}

// checkMaps asserts what the datapath relies on, reading the maps directly:
// every master's slots 1..count exist and name an existing backend, no slot
// lies beyond count, the revNAT entry names the frontend, no backend is
// orphaned, and the maps hold exactly what the cube believes; after a
// failed update, slots beyond the count and unused backends may wait for
// its retry.
func checkMaps(t *testing.T, c *Tables) {
	t.Helper()
	m := c.maps
	services := map[datapath.ServiceKey]datapath.ServiceValue{}
	var k datapath.ServiceKey
	var v datapath.ServiceValue
	for it := m.Map(MapServices).Iterate(); it.Next(&k, &v); {
		services[k] = v
	}
	backends := map[uint32]datapath.Backend{}
	var id uint32
	var b datapath.Backend
	for it := m.Map(MapBackends).Iterate(); it.Next(&id, &b); {
		backends[id] = b
	}
	used := map[uint32]bool{}
	masters := 0
	for key, val := range services {
		master := key
		master.Slot = 0
		mv, ok := services[master]
		if !ok {
			t.Fatalf("slot %d of %v has no master", key.Slot, frontendOf(key))
		}
		if key.Slot == 0 {
			masters++
			var rn datapath.Frontend
			if err := m.Map(MapRevNAT).Lookup(val.RevNatId, &rn); err != nil || rn.Addr != key.Addr || rn.Port != key.Port {
				t.Fatalf("revNAT %d of %v: %+v, %v", val.RevNatId, frontendOf(key), rn, err)
			}
			for s := uint16(1); s <= val.Count; s++ {
				slot := key
				slot.Slot = s
				if _, ok := services[slot]; !ok {
					t.Fatalf("%v: slot %d of %d missing", frontendOf(key), s, val.Count)
				}
			}
			continue
		}
		if key.Slot > mv.Count && int(key.Slot) > c.unsure[mv.RevNatId] {
			t.Fatalf("%v: slot %d beyond count %d", frontendOf(key), key.Slot, mv.Count)
		}
		if _, ok := backends[val.BackendId]; !ok {
			t.Fatalf("%v slot %d: backend %d missing", frontendOf(key), key.Slot, val.BackendId)
		}
		used[val.BackendId] = true
	}
	for _, ids := range c.held { // terminating endpoints' backends, in no slot
		for _, id := range ids {
			used[id] = true
		}
	}
	for id := range c.retired { // in no slot, kept for their flows
		used[id] = true
		var stamp uint32
		if err := m.Map(MapRetired).Lookup(id, &stamp); err != nil {
			t.Fatalf("retired backend %d is not in %s: %v", id, MapRetired, err)
		}
	}
	for id := range backends {
		// After a failed update, a backend it replaced may wait in the map,
		// in no slot, for the retry to release it.
		if !used[id] && len(c.unsure) == 0 && len(c.leftovers) == 0 {
			t.Fatalf("backend %d is not used by any slot", id)
		}
	}
	revnat := 0
	var rid uint32
	var rfe datapath.Frontend
	for it := m.Map(MapRevNAT).Iterate(); it.Next(&rid, &rfe); {
		revnat++
	}
	if revnat != masters {
		t.Fatalf("%d revNAT entries for %d frontends", revnat, masters)
	}
	if masters != len(c.frontends) {
		t.Fatalf("%d frontends in the map, cube knows %d", masters, len(c.frontends))
	}
}

func sameSet(a, b []model.Backend) bool {
	key := func(x model.Backend) string { return x.String() }
	as, bs := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		as[i] = key(a[i])
	}
	for i := range b {
		bs[i] = key(b[i])
	}
	slices.Sort(as)
	slices.Sort(bs)
	return slices.Equal(as, bs)
}

func TestUpsertIsIncremental(t *testing.T) {
	c := New(newMaps(t, nil))
	fe := testFrontend(1)
	bs := backendsN(100, 0)
	if err := c.Upsert(fe, bs); err != nil {
		t.Fatal(err)
	}
	checkMaps(t, c)

	steps := []struct {
		name   string
		next   func(prev []model.Backend) []model.Backend
		maxOps int // map updates + deletes
	}{
		// backend, slot, master
		{"add one backend", func(p []model.Backend) []model.Backend { return append(p, backendsN(1, 200)...) }, 3},
		// move last slot into the hole, master, delete last slot, delete backend
		{"remove one from the middle", func(p []model.Backend) []model.Backend { return slices.Delete(p, 50, 51) }, 4},
		// new backend, its slot, old backend
		{"replace one", func(p []model.Backend) []model.Backend { return append(slices.Delete(p, 10, 11), backendsN(1, 300)...) }, 3},
		{"same set, other order", reversed, 0},
		{"to none (rejects)", func([]model.Backend) []model.Backend { return nil }, 201},
		{"back to three", func([]model.Backend) []model.Backend { return backendsN(3, 0) }, 7},
	}
	for _, s := range steps {
		next := s.next(slices.Clone(bs))
		before := c.Ops()
		if err := c.Upsert(fe, next); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		checkMaps(t, c)
		if !sameSet(c.Backends(fe), next) {
			t.Fatalf("%s: backends %v, want %v", s.name, c.Backends(fe), next)
		}
		ops := c.Ops().Updates + c.Ops().Deletes - before.Updates - before.Deletes
		if ops > s.maxOps {
			t.Errorf("%s: %d map operations, want at most %d", s.name, ops, s.maxOps)
		}
		bs = next
	}
	if err := c.Delete(fe); err != nil {
		t.Fatal(err)
	}
	checkMaps(t, c)
}

func TestBackendsSharedBetweenFrontends(t *testing.T) {
	c := New(newMaps(t, nil))
	shared := backendsN(2, 0)
	if err := c.Upsert(testFrontend(1), shared); err != nil {
		t.Fatal(err)
	}
	if err := c.Upsert(testFrontend(2), shared); err != nil {
		t.Fatal(err)
	}
	if c.backends.len() != 2 {
		t.Fatalf("%d backend entries for 2 shared backends", c.backends.len())
	}
	// Removing one frontend must not remove backends the other still uses.
	if err := c.Delete(testFrontend(1)); err != nil {
		t.Fatal(err)
	}
	checkMaps(t, c)
	if !sameSet(c.Backends(testFrontend(2)), shared) {
		t.Fatal("frontend 2 lost its backends")
	}
}

func TestRestoreRebuildsFromMaps(t *testing.T) {
	maps := newMaps(t, nil)
	c := New(maps)
	for i := range 20 {
		if err := c.Upsert(testFrontend(i), backendsN(i%4, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Leftovers of an agent that died mid-update: a slot beyond the count
	// and a backend no slot uses.
	fe := testFrontend(3)
	if err := maps.Update(MapServices, serviceKey(fe, 9), datapath.ServiceValue{BackendId: 1}); err != nil {
		t.Fatal(err)
	}
	if err := maps.Update(MapBackends, uint32(999), datapath.Backend{Port: 1}); err != nil {
		t.Fatal(err)
	}
	if err := maps.Update(MapRevNAT, uint32(999), datapath.Frontend{Port: 1}); err != nil {
		t.Fatal(err)
	}

	r, err := Restore(maps)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseUnclaimed(); err != nil { // as after the first sync
		t.Fatal(err)
	}
	checkMaps(t, r)
	for i := range 20 {
		if !sameSet(r.Backends(testFrontend(i)), c.Backends(testFrontend(i))) {
			t.Fatalf("frontend %d: restored %v, had %v", i, r.Backends(testFrontend(i)), c.Backends(testFrontend(i)))
		}
	}
	// Re-applying the same state after a restart writes nothing.
	before := r.Ops()
	for i := range 20 {
		if err := r.Upsert(testFrontend(i), backendsN(i%4, i)); err != nil {
			t.Fatal(err)
		}
	}
	if r.Ops() != before {
		t.Errorf("re-applying unchanged state did %+v map operations", r.Ops())
	}
	// New ids never reuse old ones (a conntrack entry naming a freed id
	// must not find another backend or frontend under it).
	oldBackends, oldRevNAT := ids(t, maps, MapBackends), ids(t, maps, MapRevNAT)
	if err := r.Upsert(testFrontend(100), backendsN(1, 500)); err != nil {
		t.Fatal(err)
	}
	checkMaps(t, r)
	for _, c := range []struct {
		name string
		old  map[uint32]bool
	}{{MapBackends, oldBackends}, {MapRevNAT, oldRevNAT}} {
		top := uint32(0)
		for id := range c.old {
			top = max(top, id)
		}
		added := 0
		for id := range ids(t, maps, c.name) {
			if !c.old[id] {
				added++
				if id <= top {
					t.Errorf("%s: new id %d not above every earlier one (up to %d)", c.name, id, top)
				}
			}
		}
		if added == 0 {
			t.Errorf("%s: no new id to check", c.name)
		}
	}
}

func TestFullMapIsAClearErrorAndChangesNothing(t *testing.T) {
	c := New(newMaps(t, map[string]uint32{"lb_services": 8, "lb_backends": 8}))
	if err := c.Upsert(testFrontend(1), backendsN(3, 0)); err != nil { // 4 entries
		t.Fatal(err)
	}
	err := c.Upsert(testFrontend(2), backendsN(5, 10)) // would need 6 more entries in lb_services
	var full *cube.MapFullError
	if !errors.As(err, &full) {
		t.Fatalf("got %v, want a MapFullError", err)
	}
	for _, want := range []string{"lb_services", "(8 entries)", "--lb-service-map-size", testFrontend(2).String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	checkMaps(t, c)
	if _, ok := c.frontends[serviceKey(testFrontend(2), 0)]; ok {
		t.Error("the frontend that did not fit is half-applied")
	}
	if !sameSet(c.Backends(testFrontend(1)), backendsN(3, 0)) {
		t.Error("the existing frontend was disturbed")
	}
	// Growing an existing frontend past the limit fails the same way.
	err = c.Upsert(testFrontend(1), backendsN(8, 0))
	if !errors.As(err, &full) {
		t.Fatalf("got %v, want a MapFullError", err)
	}
	checkMaps(t, c)
}

func reversed(bs []model.Backend) []model.Backend {
	out := slices.Clone(bs)
	slices.Reverse(out)
	return out
}

// TestRestoreMergesDuplicateBackends: maps holding one backend under two ids
// (never written by this version) restore as one backend: the slot naming
// the second id is pointed at the first, and the second is deleted, so that
// releasing the backend later deletes what the slots used.
func TestRestoreMergesDuplicateBackends(t *testing.T) {
	maps := newMaps(t, nil)
	c := New(maps)
	fe := testFrontend(1)
	if err := c.Upsert(fe, backendsN(2, 0)); err != nil {
		t.Fatal(err)
	}
	var first datapath.Backend
	if err := maps.Map(MapBackends).Lookup(uint32(1), &first); err != nil {
		t.Fatal(err)
	}
	if err := maps.Update(MapBackends, uint32(50), first); err != nil {
		t.Fatal(err)
	}
	if err := maps.Update(MapServices, serviceKey(fe, 2), datapath.ServiceValue{BackendId: 50}); err != nil {
		t.Fatal(err)
	}

	r, err := Restore(maps)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseUnclaimed(); err != nil { // as after the first sync
		t.Fatal(err)
	}
	checkMaps(t, r)
	if got, want := r.Backends(fe), []model.Backend{backendsN(1, 0)[0], backendsN(1, 0)[0]}; !slices.Equal(got, want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
	if err := r.Delete(fe); err != nil {
		t.Fatal(err)
	}
	checkMaps(t, r)
	if n := len(r.Entries()); n == 0 || r.Entries()[MapBackends] != 0 {
		t.Errorf("after deleting the frontend: %v entries left", r.Entries())
	}
}

// TestRestoreKeepsDrainingBackends: a terminating endpoint's backend, in no
// slot, survives an agent restart under the same id (its established flows
// keep it) when the first sync still lists it as draining; one nobody
// claims is deleted after that sync.
func TestRestoreKeepsDrainingBackends(t *testing.T) {
	maps := newMaps(t, nil)
	c := New(maps)
	fe := testFrontend(1)
	ready, terminating := backendsN(1, 0), backendsN(2, 1) // 10.244.0.1; 10.244.0.2-3
	if err := c.Upsert(fe, append(ready, terminating...)); err != nil {
		t.Fatal(err)
	}
	ids := map[model.Backend]uint32{}
	var id uint32
	var b datapath.Backend
	for it := maps.Map(MapBackends).Iterate(); it.Next(&id, &b); {
		ids[backendOf(b)] = id
	}
	if err := c.Apply(model.FrontendBackends{Frontend: fe, Backends: ready, Draining: terminating}); err != nil {
		t.Fatal(err)
	}
	checkMaps(t, c)

	r, err := Restore(maps)
	if err != nil {
		t.Fatal(err)
	}
	// The first sync: one endpoint still terminating, the other gone.
	if err := r.Apply(model.FrontendBackends{Frontend: fe, Backends: ready, Draining: terminating[:1]}); err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseUnclaimed(); err != nil {
		t.Fatal(err)
	}
	checkMaps(t, r)
	var got datapath.Backend
	if err := maps.Map(MapBackends).Lookup(ids[terminating[0]], &got); err != nil || backendOf(got) != terminating[0] {
		t.Errorf("draining backend %s lost its id %d across the restart: %v", terminating[0], ids[terminating[0]], err)
	}
	if err := maps.Map(MapBackends).Lookup(ids[terminating[1]], &got); err == nil {
		t.Errorf("backend %s, claimed by nobody, still in the map", terminating[1])
	}
}

// ids lists the keys of a map keyed by id (lb_backends, lb_revnat).
func ids(t *testing.T, maps *cube.Maps, name string) map[uint32]bool {
	t.Helper()
	out := map[uint32]bool{}
	var id uint32
	var value []byte
	it := maps.Map(name).Iterate()
	for it.Next(&id, &value) {
		out[id] = true
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
