package cubes_test

import (
	"strings"
	"testing"

	"github.com/netcube/netcube/pkg/cubes"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestEveryMapHasOneOwner checks the registry against the BPF object,
// where generation cannot: every map the object defines is declared by
// exactly one registered cube, and every declared map exists in it, so a
// map can neither go unsized nor be written by two cubes.
func TestEveryMapHasOneOwner(t *testing.T) {
	spec, err := datapath.Spec()
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	names := map[string]bool{}
	for _, c := range cubes.All {
		if names[c.Name()] {
			t.Errorf("two cubes named %s", c.Name())
		}
		names[c.Name()] = true
		for _, m := range c.Maps() {
			if _, ok := spec.Maps[m.Name]; !ok {
				t.Errorf("cube %s declares map %s, which the BPF object does not define", c.Name(), m.Name)
			}
			if o, dup := owner[m.Name]; dup {
				t.Errorf("map %s declared by cubes %s and %s", m.Name, o, c.Name())
			}
			owner[m.Name] = c.Name()
			if m.SizeFlag != "" && m.DefaultSize == 0 {
				t.Errorf("map %s has a size flag but no default size", m.Name)
			}
		}
	}
	for name := range spec.Maps {
		if strings.HasPrefix(name, ".") { // .rodata and the like: the loader's
			continue
		}
		if _, ok := owner[name]; !ok {
			t.Errorf("map %s of the BPF object is declared by no registered cube", name)
		}
	}
}
