package memmaps_test

import (
	"strings"
	"testing"

	"github.com/netcube/netcube/pkg/cube/memmaps"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/nat"
)

// TestSetSizesAndSplits: a set sizes each map as asked and gives each
// cube its own maps only; a size for a map the BPF object lacks (a
// typo in --config's mapSizes) is refused, naming it.
func TestSetSizesAndSplits(t *testing.T) {
	set, err := memmaps.New(map[string]uint32{lb.MapServices: 10}, lb.Cube{}, nat.Cube{})
	if err != nil {
		t.Fatal(err)
	}
	own := set.Of(lb.Cube{})
	if !own.Has(lb.MapServices) || own.Size(lb.MapServices) != 10 {
		t.Errorf("lb's maps: has %s %v, size %d; want it, sized 10", lb.MapServices, own.Has(lb.MapServices), own.Size(lb.MapServices))
	}
	for _, name := range set.Of(nat.Cube{}).Names() {
		if own.Has(name) {
			t.Errorf("map %s given to both lb and nat", name)
		}
	}
	if _, err := memmaps.New(map[string]uint32{"lb_servcies": 10}, lb.Cube{}); err == nil || !strings.Contains(err.Error(), "lb_servcies") {
		t.Errorf("a size for no map: %v; want it refused, naming the map", err)
	}
}
