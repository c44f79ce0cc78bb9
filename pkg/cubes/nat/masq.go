package nat

import (
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// MapNoMasq holds the destinations pods' traffic is not masqueraded to.
const MapNoMasq = "nat_no_masq"

// masq keeps nat_no_masq equal to the cluster as the Node objects give it
// (every node's pod CIDRs and addresses: replies of Service flows from
// other nodes' pods go to those addresses and must keep their source)
// plus the configured ranges; with masquerading off, it is ::/0 alone.
type masq struct {
	maps   *cube.Maps
	on     bool
	extra  []netip.Prefix
	mu     sync.Mutex
	nodes  map[string][]netip.Prefix
	synced bool
}

var _ cube.NodeHandler = (*masq)(nil)

func (m *masq) OnNode(name string, n *model.NodeInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n == nil {
		delete(m.nodes, name)
	} else {
		var ps []netip.Prefix
		ps = append(ps, n.PodCIDRs...)
		for _, a := range n.Addresses {
			ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
		}
		m.nodes[name] = ps
	}
	m.apply()
}

func (m *masq) OnNodesSynced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.synced = true
	m.apply()
}

func (m *masq) desired() map[datapath.Prefix]bool {
	want := map[datapath.Prefix]bool{}
	if !m.on {
		want[datapath.PrefixFrom(netip.MustParsePrefix("::/0"))] = true
		return want
	}
	for _, p := range m.extra {
		want[datapath.PrefixFrom(p)] = true
	}
	for _, ps := range m.nodes {
		for _, p := range ps {
			want[datapath.PrefixFrom(p)] = true
		}
	}
	return want
}

// apply adds what is missing; what no node claims any more is removed only
// once every node has been delivered (until then a missing entry may be a
// node not delivered yet, and removing it would masquerade its traffic).
func (m *masq) apply() {
	want := m.desired()
	var have []datapath.Prefix
	_ = cube.Each(m.maps, MapNoMasq, func(k datapath.Prefix, _ uint8) bool {
		have = append(have, k)
		return true
	})
	for k := range want {
		if slices.Contains(have, k) {
			continue
		}
		if err := cube.Put(m.maps, MapNoMasq, k, uint8(1)); err != nil {
			slog.Error("no-masquerade range", "prefix", k.Prefix(), "err", err)
		}
	}
	if !m.synced && m.on {
		return
	}
	for _, k := range have {
		if !want[k] {
			if err := cube.Remove(m.maps, MapNoMasq, k); err != nil {
				slog.Error("no-masquerade range", "prefix", k.Prefix(), "err", err)
			}
		}
	}
}
