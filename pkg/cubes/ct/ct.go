// Package ct is the Go side of the conntrack cube (bpf/cubes/ct): the
// datapath creates and reads its entries; the agent only sizes the table
// (--ct-map-size) and, for tests and inspection, reads it. It also owns the
// table of fragmented datagrams the packet parser keeps (bpf/lib/frag.h:
// a datagram's ports, for its later fragments; --frag-map-size).
package ct

import (
	"context"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// MapFlows is the conntrack table: two entries per translated flow.
const MapFlows = "ct_flows"

// MapFragments holds the ports of datagrams being fragmented.
const MapFragments = "frag_datagrams"

// Directions of an entry (enum ct_dir in bpf/cubes/ct/ct_maps.h).
const (
	Service = uint8(datapath.CTService) // client -> frontend: the flow's backend
	Reply   = uint8(datapath.CTReply)   // backend -> client: how to translate back
)

// Cube is the conntrack cube as the registry lists it.
type Cube struct{}

var _ cube.Cube = Cube{}

func (Cube) Name() string { return "ct" }

func (Cube) Maps() []cube.MapSpec {
	return []cube.MapSpec{
		{Name: MapFlows, DefaultSize: 262144, SizeFlag: "ct-map-size"},
		{Name: MapFragments, DefaultSize: 8192, SizeFlag: "frag-map-size"},
	}
}

// Start has nothing to do: conntrack's entries are the datapath's.
func (Cube) Start(context.Context, cube.Env) (cube.Started, error) { return cube.Started{}, nil }

// Lookup reads the entry of key.
func Lookup(maps *cube.Maps, key datapath.CTKey) (datapath.CTEntry, bool, error) {
	return cube.Get[datapath.CTKey, datapath.CTEntry](maps, MapFlows, key)
}
