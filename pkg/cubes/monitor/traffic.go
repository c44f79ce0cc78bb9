package monitor

import (
	"fmt"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// MapCubes counts the packets and bytes each cube handled
// (bpf/cubes/monitor/monitor_maps.h, enum mon_cube says what each counts).
const MapCubes = "monitor_cubes"

// cubeNames names enum mon_cube as the registry and the metrics do; a
// cube the C adds without a name here fails TestEveryCubeIsNamed.
var cubeNames = map[datapath.MonCube]string{
	datapath.MonCubeLB:     "lb",
	datapath.MonCubeCT:     "ct",
	datapath.MonCubeNAT:    "nat",
	datapath.MonCubeRouter: "router",
	datapath.MonCubePolicy: "policy",
	datapath.MonCubeQoS:    "qos",
}

// Traffic is what a cube handled: packets, and their bytes as they
// arrived at the hook.
type Traffic struct {
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
}

// CubeTraffic reads monitor_cubes, summed across CPUs, by cube name.
func CubeTraffic(m cube.Map) (map[string]Traffic, error) {
	var perCPU []datapath.MonCubes
	if err := m.Lookup(uint32(0), &perCPU); err != nil {
		return nil, fmt.Errorf("read %s: %w", MapCubes, err)
	}
	out := make(map[string]Traffic, len(cubeNames))
	for c, name := range cubeNames {
		var t Traffic
		for _, cpu := range perCPU {
			t.Packets += cpu.Cube[c].Packets
			t.Bytes += cpu.Cube[c].Bytes
		}
		out[name] = t
	}
	return out, nil
}
