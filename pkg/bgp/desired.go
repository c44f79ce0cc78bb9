package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/model"
)

// What a node runs and announces, decided from the NetworkBGPPeerings
// that select it, its Node, and its Services as its datapath serves them.
// A pure function of those, so the whole decision is a table test.

// problem is something wrong with a peering, for an Event on it.
type problem struct {
	peering  string
	conflict bool // another peering's ASN wins (else an invalid field)
	err      error
}

// passwordFunc reads a peer's TCP MD5 password from its Secret.
type passwordFunc func(*model.SecretKey) (string, error)

// selects says whether a peering selects node.
func selects(node *model.NodeInfo, peerings map[string]*model.BGPPeering) bool {
	if node == nil {
		return false
	}
	for _, p := range peerings {
		if p != nil && p.Nodes != nil && p.Nodes.Matches(labels.Set(node.Labels)) {
			return true
		}
	}
	return false
}

// desired is the speaker's config and routes for node (active false: no
// peering selects it, or none can run; the speaker stops).
func desired(node *model.NodeInfo, peerings map[string]*model.BGPPeering, services map[model.ServiceID]lb.Advertised, password passwordFunc) (cfg Config, routes []Route, active bool, problems []problem) {
	if node == nil {
		return cfg, nil, false, nil
	}
	// The peerings selecting this node, by name: the first decides the
	// ASN; others with the same ASN add their peers and what they
	// advertise, others with another are reported and left out.
	var names []string
	for name, p := range peerings {
		if p != nil && p.Nodes != nil && p.Nodes.Matches(labels.Set(node.Labels)) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return cfg, nil, false, nil
	}
	first := peerings[names[0]]
	var adv model.BGPAdvertise
	cfg.LocalASN = first.LocalASN
	cfg.RouterID = first.RouterID
	if !cfg.RouterID.IsValid() {
		cfg.RouterID = firstAddr(node.Addresses, true)
	}
	if !cfg.RouterID.IsValid() {
		problems = append(problems, problem{peering: first.Name, err: fmt.Errorf("spec.routerID: absent, and node %s has no IPv4 address to take it from; no BGP on it", node.Name)})
		return Config{}, nil, false, problems
	}
	peerOf := map[netip.Addr]string{}
	for _, name := range names {
		p := peerings[name]
		if p.LocalASN != first.LocalASN {
			problems = append(problems, problem{peering: name, conflict: true,
				err: fmt.Errorf("spec.localASN: %d, but NetworkBGPPeering %s also selects node %s with ASN %d; this one is not applied there", p.LocalASN, first.Name, node.Name, first.LocalASN)})
			continue
		}
		if p.RouterID.IsValid() && cfg.RouterID.IsValid() && p.RouterID != cfg.RouterID {
			problems = append(problems, problem{peering: name, conflict: true,
				err: fmt.Errorf("spec.routerID: %s, but NetworkBGPPeering %s gives node %s the router id %s; its is used", p.RouterID, first.Name, node.Name, cfg.RouterID)})
		}
		for i, peer := range p.Peers {
			if other, dup := peerOf[peer.Address]; dup {
				problems = append(problems, problem{peering: name, conflict: true,
					err: fmt.Errorf("spec.peers[%d].address: %s is a peer of NetworkBGPPeering %s too, which is used", i, peer.Address, other)})
				continue
			}
			if !firstAddr(node.Addresses, peer.Address.Is4()).IsValid() {
				problems = append(problems, problem{peering: name, err: fmt.Errorf("spec.peers[%d].address: %s is %s, and node %s has no address of that family to reach it from; peer left out",
					i, peer.Address, familyName(peer.Address), node.Name)})
				continue
			}
			out, err := toPeer(peer, password)
			if err != nil {
				problems = append(problems, problem{peering: name, err: fmt.Errorf("spec.peers[%d]: %w; peer left out", i, err)})
				continue
			}
			peerOf[peer.Address] = name
			cfg.Peers = append(cfg.Peers, out)
		}
		adv.PodCIDRs = adv.PodCIDRs || p.Advertise.PodCIDRs
		adv.LoadBalancerIPs = adv.LoadBalancerIPs || p.Advertise.LoadBalancerIPs
		adv.ExternalIPs = adv.ExternalIPs || p.Advertise.ExternalIPs
		adv.ClusterIPs = adv.ClusterIPs || p.Advertise.ClusterIPs
		adv.Services = append(adv.Services, p.Advertise.Services...)
	}
	if len(cfg.Peers) == 0 {
		return Config{}, nil, false, problems
	}
	routes = nodeRoutes(node, adv, services)
	return cfg, routes, true, problems
}

func toPeer(p model.BGPPeer, password passwordFunc) (Peer, error) {
	out := Peer{Address: p.Address, ASN: p.ASN, Port: p.Port, EBGPMultihopTTL: p.EBGPMultihop,
		HoldTime: p.HoldTime, KeepaliveInterval: p.Keepalive,
		GracefulRestart: GracefulRestart{Enabled: p.GracefulRestart, RestartTime: p.RestartTime}}
	for _, f := range p.Families {
		if f == model.IPv4 {
			out.Families = append(out.Families, IPv4Unicast)
		} else {
			out.Families = append(out.Families, IPv6Unicast)
		}
	}
	if p.PasswordSecret != nil {
		if password == nil {
			return out, errors.New("passwordSecretRef: this agent reads no Secrets")
		}
		pw, err := password(p.PasswordSecret)
		if err != nil {
			return out, fmt.Errorf("passwordSecretRef: Secret %s key %s: %w", p.PasswordSecret.Name, p.PasswordSecret.Key, err)
		}
		out.Password = pw
	}
	return out, nil
}

// firstAddr is the node's first IPv4 (or global IPv6) address.
func firstAddr(addrs []netip.Addr, v4 bool) netip.Addr {
	for _, a := range addrs {
		if a.Is4() == v4 && !a.IsLinkLocalUnicast() && !a.IsLoopback() {
			return a
		}
	}
	return netip.Addr{}
}

// nodeRoutes are the routes node announces: its own pod CIDRs (never
// another's: they come from its own Node), and its Services' addresses,
// those of a Local Service only while it has a ready endpoint here. An
// IPv6 route's next hop is the node's IPv6 address (an IPv4 session has
// no IPv6 local address to put there); a node without one announces no
// IPv6 route.
func nodeRoutes(node *model.NodeInfo, adv model.BGPAdvertise, services map[model.ServiceID]lb.Advertised) []Route {
	nh6 := firstAddr(node.Addresses, false)
	byPrefix := map[netip.Prefix]Route{}
	add := func(p netip.Prefix, attrs *model.BGPServiceAttributes) {
		r := Route{Prefix: p.Masked()}
		if p.Addr().Is6() {
			if !nh6.IsValid() {
				return
			}
			r.NextHop = nh6
		}
		if attrs != nil {
			r.Communities = slices.Clone(attrs.Communities)
			r.LocalPref = attrs.LocalPreference
		}
		if _, dup := byPrefix[r.Prefix]; !dup { // two Services, one address: the first (by id) decides
			byPrefix[r.Prefix] = r
		}
	}
	if adv.PodCIDRs {
		for _, p := range node.PodCIDRs {
			add(p, nil)
		}
	}
	ids := make([]model.ServiceID, 0, len(services))
	for id := range services {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	for _, id := range ids {
		s := services[id]
		attrs := attributesFor(adv.Services, s.Labels)
		host := func(a netip.Addr) { add(netip.PrefixFrom(a, a.BitLen()), attrs) }
		if adv.ClusterIPs {
			for _, a := range s.ClusterIPs {
				host(a)
			}
		}
		if s.LocalOnly && s.LocalEndpoints == 0 {
			continue // Local: only the nodes with a ready endpoint attract its traffic
		}
		if adv.ExternalIPs {
			for _, a := range s.ExternalIPs {
				host(a)
			}
		}
		if adv.LoadBalancerIPs {
			for _, a := range s.LoadBalancerIPs {
				host(a)
			}
		}
	}
	out := make([]Route, 0, len(byPrefix))
	for _, r := range byPrefix {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Compare(out[i].Prefix.String(), out[j].Prefix.String()) < 0 })
	return out
}

func attributesFor(list []model.BGPServiceAttributes, svcLabels map[string]string) *model.BGPServiceAttributes {
	for i := range list {
		if list[i].Selector != nil && list[i].Selector.Matches(labels.Set(svcLabels)) {
			return &list[i]
		}
	}
	return nil
}

var errNoSecrets = errors.New("this agent reads no Secrets")

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
