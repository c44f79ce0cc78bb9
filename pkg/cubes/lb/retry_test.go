package lb

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/model"
)

// errInjected is the failure the fake maps inject.
var errInjected = errors.New("injected failure")

// failNth makes the n-th map write or delete from now on fail (once).
func failNth(f *cubetest.Fake, n int) (failed func() bool) {
	count, hit := 0, false
	f.FailWhen(func(cubetest.Op) error {
		count++
		if count == n {
			hit = true
			return errInjected
		}
		return nil
	})
	return func() bool { return hit }
}

// state is what a reader of the maps can see: each frontend's backends and
// options, and how many entries each map holds (leftovers show there).
type state struct {
	frontends map[model.Frontend][]model.Backend
	flags     map[model.Frontend]model.FrontendFlags
	entries   map[string]int
}

func stateOf(t *testing.T, f *cubetest.Fake) state {
	t.Helper()
	fes, err := Dump(f.Maps)
	if err != nil {
		t.Fatal(err)
	}
	s := state{frontends: fes, flags: map[model.Frontend]model.FrontendFlags{}, entries: map[string]int{}}
	for fe := range fes {
		s.flags[fe], _ = Flags(f.Maps, fe)
	}
	for _, m := range []string{MapServices, MapBackends, MapRevNAT, MapAffinityMatch, MapMaglev, MapSourceRanges} {
		s.entries[m] = f.Len(m)
	}
	return s
}

// TestFailedUpdateIsCompletedByARetry fails each map operation of an
// update in turn. After the failure the maps still hold only whole
// frontends (checkMaps); the retry (or a Delete) then leaves exactly what
// applying the state once, without failures, leaves: no leftover entry, no
// lost one.
func TestFailedUpdateIsCompletedByARetry(t *testing.T) {
	ranges := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	fe := testFrontend(1)
	other := model.FrontendBackends{Frontend: testFrontend(2), Backends: backendsN(2, 1)} // shares a backend
	for _, c := range []struct {
		name   string
		before *model.FrontendBackends // nil: the frontend is new
		after  model.FrontendBackends
	}{
		{"new frontend", nil, model.FrontendBackends{Frontend: fe, Backends: backendsN(3, 0)}},
		{"new, with affinity, Maglev and source ranges", nil, model.FrontendBackends{Frontend: fe, Backends: backendsN(3, 0),
			Flags: model.Maglev | model.SourceRanges, Affinity: 60, SourceRanges: ranges}},
		{"grown", &model.FrontendBackends{Frontend: fe, Backends: backendsN(2, 0)}, model.FrontendBackends{Frontend: fe, Backends: backendsN(5, 0)}},
		{"shrunk, a backend draining", &model.FrontendBackends{Frontend: fe, Backends: backendsN(4, 0)},
			model.FrontendBackends{Frontend: fe, Backends: backendsN(2, 0), Draining: backendsN(1, 3)}},
		{"backends replaced", &model.FrontendBackends{Frontend: fe, Backends: backendsN(3, 0)}, model.FrontendBackends{Frontend: fe, Backends: backendsN(3, 10)}},
		{"affinity and Maglev on", &model.FrontendBackends{Frontend: fe, Backends: backendsN(3, 0)},
			model.FrontendBackends{Frontend: fe, Backends: backendsN(4, 0), Flags: model.Maglev, Affinity: 30}},
		{"source ranges replaced", &model.FrontendBackends{Frontend: fe, Backends: backendsN(2, 0), Flags: model.SourceRanges, SourceRanges: ranges},
			model.FrontendBackends{Frontend: fe, Backends: backendsN(2, 0), Flags: model.SourceRanges,
				SourceRanges: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), ranges[1]}}},
		{"affinity, Maglev and ranges off", &model.FrontendBackends{Frontend: fe, Backends: backendsN(3, 0), Flags: model.Maglev | model.SourceRanges, Affinity: 30, SourceRanges: ranges},
			model.FrontendBackends{Frontend: fe, Backends: backendsN(2, 5)}},
	} {
		// What applying the states without failures leaves.
		ref := cubetest.New(t, nil, Cube{})
		refTables := New(ref.Maps)
		apply := func(tb *Tables, fbs ...model.FrontendBackends) error {
			for _, fb := range fbs {
				if err := tb.Apply(fb); err != nil {
					return err
				}
			}
			return nil
		}
		setup := []model.FrontendBackends{other}
		if c.before != nil {
			setup = append(setup, *c.before)
		}
		if err := apply(refTables, append(setup, c.after)...); err != nil {
			t.Fatal(err)
		}
		want := stateOf(t, ref)
		if err := refTables.Delete(fe); err != nil {
			t.Fatal(err)
		}
		wantDeleted := stateOf(t, ref)

	attempts:
		for n := 1; ; n++ {
			for _, thenDelete := range []bool{false, true} {
				name := fmt.Sprintf("%s/operation %d fails, then %s", c.name, n, map[bool]string{false: "retry", true: "delete"}[thenDelete])
				f := cubetest.New(t, nil, Cube{})
				tb := New(f.Maps)
				if err := apply(tb, setup...); err != nil {
					t.Fatal(err)
				}
				failed := failNth(f, n)
				err := tb.Apply(c.after)
				f.FailWhen(nil)
				if !failed() {
					if err != nil {
						t.Fatalf("%s: %v without an injected failure", name, err)
					}
					if n == 1 {
						t.Fatalf("%s: the update wrote nothing", c.name)
					}
					if got := stateOf(t, f); !reflect.DeepEqual(got, want) {
						t.Fatalf("%s: without failure\n got %+v\nwant %+v", name, got, want)
					}
					break attempts
				}
				if err == nil { // a failed delete, tried again at once
					if got := stateOf(t, f); !reflect.DeepEqual(got, want) {
						t.Fatalf("%s: failure absorbed, yet\n got %+v\nwant %+v", name, got, want)
					}
					continue
				}
				checkMaps(t, tb)
				if thenDelete {
					err, want := tb.Delete(fe), wantDeleted
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if got := stateOf(t, f); !reflect.DeepEqual(got, want) {
						t.Errorf("%s: after the delete\n got %+v\nwant %+v", name, got, want)
					}
					continue
				}
				if err := tb.Apply(c.after); err != nil {
					t.Fatalf("%s: retry: %v", name, err)
				}
				checkMaps(t, tb)
				if got := stateOf(t, f); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: after the retry\n got %+v\nwant %+v", name, got, want)
				}
			}
		}
	}
}
