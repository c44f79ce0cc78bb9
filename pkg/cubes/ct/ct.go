// Package ct is the Go side of the conntrack cube (bpf/cubes/ct): the
// datapath creates, follows and (at a flow's close) removes its entries;
// the agent sizes the table (--ct-map-size; a full one evicts its oldest
// flow not yet answered for a new one, --conntrack-early-drop), sets its timeouts at load
// (Config, the --conntrack-* flags), removes timed-out entries with the
// datapath's own iterator (GC) and exports the table's metrics. It also
// owns the table of fragmented datagrams the packet parser keeps
// (bpf/lib/frag.h: a datagram's ports, for its later fragments;
// --frag-map-size).
package ct

import (
	"context"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// MapFlows is the conntrack table: two entries per translated flow, and
// one per connection the policy cube allowed (CT_POLICY).
const MapFlows = "ct_flows"

// MapFragments holds the ports of datagrams being fragmented.
const MapFragments = "frag_datagrams"

// MapStats counts, per CPU, flows written, closed and not written.
const MapStats = "ct_stats"

// MapUnanswered and MapUnansweredRing are early drop's ring: the flows
// written not yet answered, oldest first, that a full table evicts for a
// new flow (bpf/cubes/ct/evict.h), and where it stands.
const (
	MapUnanswered     = "ct_unanswered"
	MapUnansweredRing = "ct_unanswered_ring"
)

// MapAcct counts each flow's packets and bytes while the agent traces
// (reported with the flow's end); MapScratch is the programs' room for it.
const (
	MapAcct    = "ct_acct"
	MapScratch = "ct_scratch"
)

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
		{Name: MapFlows, DefaultSize: 262144, SizeFlag: "ct-map-size", Upgrade: upgradeEntry},
		{Name: MapFragments, DefaultSize: 8192, SizeFlag: "frag-map-size"},
		{Name: MapStats},
		{Name: MapUnanswered},
		{Name: MapUnansweredRing},
		{Name: MapAcct, DefaultSize: 262144, SizeFlag: "ct-map-size"},
		{Name: MapScratch, Restart: true}, // scratch: a new layout replaces the pin
	}
}

// Start runs the GC every Settings.ConntrackGCInterval and exports the
// table's metrics.
func (Cube) Start(ctx context.Context, env cube.Env) (cube.Started, error) {
	if env.Settings.Hollow {
		return cube.Started{}, nil // no datapath writes entries to collect, and no program runs
	}
	gc, err := NewGC(env.Program("ct_gc"), env.Maps.Map(MapFlows), env.Maps.Map(MapStats))
	if err != nil {
		return cube.Started{}, err
	}
	if iv := env.Settings.ConntrackGCInterval; iv > 0 {
		go gc.Run(ctx, iv)
	}
	return cube.Started{Metrics: gc.Metrics()}, nil
}

// Lookup reads the entry of key.
func Lookup(maps *cube.Maps, key datapath.CTKey) (datapath.CTEntry, bool, error) {
	return cube.Get[datapath.CTKey, datapath.CTEntry](maps, MapFlows, key)
}
