package policy

import (
	"context"

	"github.com/netcube/netcube/pkg/cube"
)

// Cube is the policy cube as the registry lists it. The datapath enforces
// whatever its maps hold (bpf/cubes/policy); until the agent's pod,
// namespace and NetworkPolicy sources feed a Compiler and Sync (issue 18,
// in progress) the maps stay empty, no pod is selected, and a packet costs
// one lookup in pol_endpoints.
type Cube struct{}

var _ cube.Cube = Cube{}

func (Cube) Name() string { return "policy" }

func (Cube) Maps() []cube.MapSpec {
	return []cube.MapSpec{
		{Name: MapPeers, DefaultSize: 65536, SizeFlag: "policy-identity-map-size"},
		{Name: MapEndpoints, DefaultSize: 4096, SizeFlag: "router-endpoints-max"},
		{Name: MapEntries, DefaultSize: 262144, SizeFlag: "policy-map-size"},
		{Name: MapFlows, DefaultSize: 262144, SizeFlag: "policy-flow-map-size"},
		{Name: MapDrops, DefaultSize: 16384},
	}
}

// Start has nothing to start yet: see Cube.
func (Cube) Start(context.Context, cube.Env) (cube.Started, error) { return cube.Started{}, nil }
