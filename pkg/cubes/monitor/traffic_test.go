package monitor_test

import (
	"testing"

	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/cubes"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestEveryCubeIsNamed: each cube monitor_cubes counts (enum mon_cube) has
// a name, the name of a cube of the registry, and CubeTraffic sums each
// across CPUs.
func TestEveryCubeIsNamed(t *testing.T) {
	registry := map[string]bool{}
	for _, c := range cubes.All {
		registry[c.Name()] = true
	}
	var perCPU [2]datapath.MonCubes
	for c := datapath.MonCube(0); c < datapath.MonCubeMax; c++ {
		perCPU[0].Cube[c].Packets, perCPU[0].Cube[c].Bytes = uint64(c)+1, 100*(uint64(c)+1)
		perCPU[1].Cube[c].Packets, perCPU[1].Cube[c].Bytes = 1, 10
	}
	fake := cubetest.New(t, nil, monitor.Cube{})
	m := fake.Maps.Map(monitor.MapCubes)
	if err := m.Update(uint32(0), perCPU[:]); err != nil {
		t.Fatal(err)
	}
	got, err := monitor.CubeTraffic(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != int(datapath.MonCubeMax) {
		t.Fatalf("%d cubes named, want %d: %v", len(got), datapath.MonCubeMax, got)
	}
	seen := map[monitor.Traffic]bool{}
	for name, tr := range got {
		if !registry[name] {
			t.Errorf("cube %q is not a cube of the registry", name)
		}
		if tr.Packets < 2 || tr.Bytes != 100*(tr.Packets-1)+10 || seen[tr] {
			t.Errorf("%s: %+v, not its two CPUs' sum", name, tr)
		}
		seen[tr] = true
	}
}
