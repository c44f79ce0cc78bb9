// Package nat is the Go side of the NAT cube (bpf/cubes/nat): it writes
// the node's own addresses, which flows from outside the cluster
// (externalTrafficPolicy Cluster) and pods' flows to outside the cluster
// (masquerading) are source-translated to, and what is outside the
// cluster: every destination but the nodes' pod CIDRs and addresses (from
// the Node objects) and the configured ranges; and it counts what became
// of the ICMP messages of those flows (icmp.go). The rewriting and the
// choice of SNAT ports are the datapath's.
package nat

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// MapNodeAddrs holds this node's SNAT address of each family.
const MapNodeAddrs = "node_addrs"

// Cube is the NAT cube as the registry lists it.
type Cube struct{}

var _ cube.Cube = Cube{}

func (Cube) Name() string { return "nat" }

func (Cube) Maps() []cube.MapSpec {
	return []cube.MapSpec{{Name: MapNodeAddrs}, {Name: MapNoMasq, DefaultSize: 16384, SizeFlag: "nat-no-masq-max"}, {Name: MapICMPStats}}
}

// Start writes the node's first address of each family as its SNAT
// address.
func (Cube) Start(_ context.Context, env cube.Env) (cube.Started, error) {
	var v4, v6 netip.Addr
	for _, a := range env.Node.Addrs {
		if a.Is4() && !v4.IsValid() {
			v4 = a
		}
		if a.Is6() && !v6.IsValid() {
			v6 = a
		}
	}
	slog.Info("SNAT addresses", "ipv4", v4, "ipv6", v6, "masquerade", env.Settings.Masquerade)
	m := &masq{maps: env.Maps, on: env.Settings.Masquerade, extra: env.Settings.NoMasquerade, nodes: map[string][]netip.Prefix{}}
	m.apply()
	return cube.Started{Nodes: m, Metrics: []prometheus.Collector{newICMPMetrics(env.Maps.Map(MapICMPStats))}},
		SetNodeAddrs(env.Maps, v4, v6)
}

// SetNodeAddrs writes this node's address of each family (the source of
// SNATed external flows); an invalid address clears that family's, which
// stops its external Services with externalTrafficPolicy Cluster.
func SetNodeAddrs(maps *cube.Maps, v4, v6 netip.Addr) error {
	for i, a := range map[datapath.NodeAddrIndex]netip.Addr{datapath.NodeAddrV4: v4, datapath.NodeAddrV6: v6} {
		var v datapath.Addr
		if a.IsValid() {
			v = datapath.AddrFrom(a)
		}
		if err := cube.Put(maps, MapNodeAddrs, i, v); err != nil {
			return fmt.Errorf("node address %d: %w", i, err)
		}
	}
	return nil
}
