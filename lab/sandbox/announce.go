package sandbox

import (
	"net/netip"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
)

// Announcing lists the nodes whose datapath answers ARP and NDP for ip
// (their pinned lb_announce holds it). A dead node's pins keep what it
// last held: a datapath without its link.
func (t Topology) Announcing(ip netip.Addr) []string {
	want := datapath.AddrFrom(ip)
	var out []string
	for _, n := range t.Nodes {
		maps, closeMaps, err := datapath.OpenPinned(n.PinDir)
		if err != nil {
			continue // no pins (the node is not up)
		}
		found := false
		_ = cube.Each(maps, lb.MapAnnounce, func(k datapath.AnnounceKey, _ datapath.AnnounceValue) bool {
			found = found || k.Addr == want
			return !found
		})
		closeMaps()
		if found {
			out = append(out, n.Name)
		}
	}
	return out
}
