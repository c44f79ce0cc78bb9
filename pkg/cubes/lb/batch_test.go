package lb

import (
	"errors"
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/model"
)

// TestUpsertAllWritesWhatUpsertWrites: the batched path leaves the maps
// exactly as one Upsert per frontend would, including backends shared
// between frontends and frontends the cube already had.
func TestUpsertAllWritesWhatUpsertWrites(t *testing.T) {
	var items []model.FrontendBackends
	for i := range 200 {
		items = append(items, model.FrontendBackends{Frontend: testFrontend(i), Backends: backendsN(1+i%4, i%7)})
	}
	items = append(items, model.FrontendBackends{Frontend: testFrontend(500)}) // no backends: rejects

	one := New(newMaps(t, nil))
	for _, it := range items {
		if err := one.Upsert(it.Frontend, it.Backends); err != nil {
			t.Fatal(err)
		}
	}
	all := New(newMaps(t, nil))
	if err := all.Upsert(testFrontend(3), backendsN(2, 50)); err != nil { // already there, to be changed
		t.Fatal(err)
	}
	if err := all.UpsertAll(items); err != nil {
		t.Fatal(err)
	}
	checkMaps(t, all)
	want, err := Dump(one.maps)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Dump(all.maps)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d frontends in the maps, want %d", len(got), len(want))
	}
	for fe, bs := range want {
		if !sameSet(got[fe], bs) {
			t.Errorf("%s: backends %v, want %v", fe, got[fe], bs)
		}
	}
	if n, m := all.backends.len(), one.backends.len(); n != m {
		t.Errorf("%d backends, want %d (shared backends written once)", n, m)
	}
}

// TestUpsertAllFullMapLeavesNothingHalfDone: when a batch does not fit, the
// call fails with the map-full error and none of its new frontends (or
// their backends) stay in the maps; frontends there before are untouched.
func TestUpsertAllFullMapLeavesNothingHalfDone(t *testing.T) {
	c := New(newMaps(t, map[string]uint32{"lb_services": 16, "lb_backends": 16}))
	if err := c.Upsert(testFrontend(1), backendsN(2, 0)); err != nil { // 3 entries
		t.Fatal(err)
	}
	var items []model.FrontendBackends
	for i := 10; i < 20; i++ { // 20 more entries: does not fit
		items = append(items, model.FrontendBackends{Frontend: testFrontend(i), Backends: backendsN(1, i)})
	}
	err := c.UpsertAll(items)
	var full *cube.MapFullError
	if !errors.As(err, &full) {
		t.Fatalf("got %v, want a MapFullError", err)
	}
	checkMaps(t, c)
	if fes := c.Frontends(); len(fes) != 1 || fes[0] != testFrontend(1) {
		t.Errorf("frontends after the failed batch: %v, want only the one there before", fes)
	}
	if !sameSet(c.Backends(testFrontend(1)), backendsN(2, 0)) {
		t.Error("the existing frontend was disturbed")
	}
}
