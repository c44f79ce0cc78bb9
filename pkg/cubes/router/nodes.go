package router

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// route is one route to another node's pod CIDR: via the node's underlay
// address (native) or through the overlay device (VXLAN, Via unset).
type route struct {
	Dst netip.Prefix
	Via netip.Addr
	Dev int // ifindex; 0: the one the kernel resolves Via on
}

// routeTable is the node's route table, as far as the router's own routes
// go (kernelRoutes; a fake in tests).
type routeTable interface {
	Replace(route) error
	Delete(netip.Prefix) error
	List() ([]route, error)
}

// nodes keeps the route table and router_nodes equal to the other nodes'
// pod CIDRs as their Node objects give them.
type nodes struct {
	maps    *cube.Maps
	table   routeTable
	report  *report.Reporter
	self    string
	mode    string
	overlay int       // the overlay device's ifindex (VXLAN)
	macs    *nodeMACs // the other nodes' MACs (nil: a hollow node)

	mu      sync.Mutex
	known   map[string]*model.NodeInfo // every node, this one included
	applied map[netip.Prefix]peer      // routed now
	offLink map[netip.Prefix]bool      // routed by the default route: not on a network of this node
	synced  bool
}

// peer is where a pod CIDR is routed to.
type peer struct {
	node     string
	underlay netip.Addr // the tunnel's remote end (VXLAN), or next hop (native)
}

var _ cube.NodeHandler = (*nodes)(nil)

func newNodes(env cube.Env, mode string, overlay int, table routeTable) *nodes {
	return &nodes{maps: env.Maps, table: table, report: env.Report, self: env.Node.Name, mode: mode, overlay: overlay,
		known: map[string]*model.NodeInfo{}, applied: map[netip.Prefix]peer{}, offLink: map[netip.Prefix]bool{}}
}

func (n *nodes) OnNode(name string, info *model.NodeInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if info == nil {
		delete(n.known, name)
	} else {
		n.known[name] = info
	}
	n.apply()
}

// OnNodesSynced removes what routes nodes that no longer exist (an agent
// restarted while a node went).
func (n *nodes) OnNodesSynced() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.synced = true
	n.apply()
}

// desired computes every routed pod CIDR. Nodes are taken in name order,
// so every node refuses the same one of two overlapping CIDRs: the node
// sorting later (and this node's own CIDRs always win here).
func (n *nodes) desired() map[netip.Prefix]peer {
	want := map[netip.Prefix]peer{}
	taken := map[netip.Prefix]string{}
	if self := n.known[n.self]; self != nil {
		for _, p := range self.PodCIDRs {
			taken[p] = n.self
		}
	}
	names := make([]string, 0, len(n.known))
	for name := range n.known {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		info := n.known[name]
		obj := report.Object{Kind: "Node", Name: name}
		var conflicts []string
		for i, p := range info.PodCIDRs {
			if name == n.self {
				continue
			}
			if other, ok := overlapping(taken, p); ok {
				conflicts = append(conflicts, fmt.Sprintf("spec.podCIDRs[%d]: %s overlaps node %s's %s; not routed", i, p, taken[other], other))
				continue
			}
			taken[p] = name
			via := n.underlay(info, p)
			if !via.IsValid() {
				conflicts = append(conflicts, fmt.Sprintf("spec.podCIDRs[%d]: %s: the node has no address to route it to (status.addresses)", i, p))
				continue
			}
			want[p] = peer{node: name, underlay: via}
		}
		if n.report != nil && name != n.self {
			n.report.Set(obj, report.PodCIDRConflict, strings.Join(conflicts, "; "))
		}
	}
	return want
}

func overlapping(taken map[netip.Prefix]string, p netip.Prefix) (netip.Prefix, bool) {
	for q := range taken {
		if q.Overlaps(p) {
			return q, true
		}
	}
	return netip.Prefix{}, false
}

// underlay picks the node address a pod CIDR is routed to: native routing
// needs one of the CIDR's family (the next hop); the overlay prefers IPv4
// (its overhead is what the MTU allows for).
func (n *nodes) underlay(info *model.NodeInfo, p netip.Prefix) netip.Addr {
	var v4, v6 netip.Addr
	for _, a := range info.Addresses {
		if a.Is4() && !v4.IsValid() {
			v4 = a
		}
		if a.Is6() && !v6.IsValid() && !a.IsLinkLocalUnicast() {
			v6 = a
		}
	}
	if n.mode == VXLAN && v4.IsValid() { // (kernel mode routes as native)
		return v4
	}
	if p.Addr().Is4() {
		return v4
	}
	return v6
}

// apply writes what changed. Before the initial sync nothing is removed
// that an earlier agent routed and no Node has yet claimed: that Node may
// simply not be delivered yet.
func (n *nodes) apply() {
	want := n.desired()
	if n.macs != nil {
		var addrs []netip.Addr
		for name, info := range n.known {
			if name != n.self {
				addrs = append(addrs, info.Addresses...)
			}
		}
		n.macs.set(addrs)
	}
	for p, w := range want {
		if have, ok := n.applied[p]; ok && have == w {
			continue
		}
		if err := n.write(p, w); err != nil {
			slog.Error("route to a node's pods", "node", w.node, "cidr", p, "err", err)
			continue
		}
		n.applied[p] = w
		slog.Info("pods routed", "node", w.node, "cidr", p, "via", w.underlay, "mode", n.mode)
	}
	for p, have := range n.applied {
		if _, ok := want[p]; ok {
			continue
		}
		if err := n.remove(p); err != nil {
			slog.Error("remove the route to a node's pods", "node", have.node, "cidr", p, "err", err)
			continue
		}
		delete(n.applied, p)
		slog.Info("pods no longer routed", "node", have.node, "cidr", p)
	}
	if n.synced {
		n.removeStale(want)
	}
}

func (n *nodes) write(p netip.Prefix, w peer) error {
	r := route{Dst: p, Via: w.underlay}
	if n.mode == VXLAN {
		r = route{Dst: p, Dev: n.overlay}
	}
	if err := n.table.Replace(r); err != nil {
		if n.mode == VXLAN || !(errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH)) {
			return err
		}
		// The node is on none of this node's networks (another rack,
		// behind a router): its pods are reached through the default
		// route, whose routers learn their CIDR from that node's BGP
		// speaker (pkg/bgp). A route of ours left from before goes.
		if err := n.table.Delete(p); err != nil {
			return err
		}
		if !n.offLink[p] {
			slog.Info("node not on this node's networks: its pods are reached through the default route (the routers learn its pod CIDR by BGP)",
				"node", w.node, "cidr", p, "via", w.underlay)
		}
		n.offLink[p] = true
	} else {
		delete(n.offLink, p)
	}
	return cube.Put(n.maps, MapNodes, datapath.PrefixFrom(p), datapath.RouterNode{Underlay: datapath.AddrFrom(w.underlay)})
}

func (n *nodes) remove(p netip.Prefix) error {
	if err := n.table.Delete(p); err != nil {
		return err
	}
	return cube.Remove(n.maps, MapNodes, datapath.PrefixFrom(p))
}

// removeStale removes routes and entries no node claims (left by an agent
// before a restart).
func (n *nodes) removeStale(want map[netip.Prefix]peer) {
	routes, err := n.table.List()
	if err != nil {
		slog.Error("list routes", "err", err)
	}
	for _, r := range routes {
		if _, ok := want[r.Dst]; !ok {
			if err := n.table.Delete(r.Dst); err != nil {
				slog.Error("remove a stale route", "cidr", r.Dst, "err", err)
			}
		}
	}
	var stale []datapath.Prefix
	_ = cube.Each(n.maps, MapNodes, func(k datapath.Prefix, _ datapath.RouterNode) bool {
		if _, ok := want[k.Prefix()]; !ok {
			stale = append(stale, k)
		}
		return true
	})
	for _, k := range stale {
		if err := cube.Remove(n.maps, MapNodes, k); err != nil {
			slog.Error("remove a stale node entry", "err", err)
		}
	}
}
