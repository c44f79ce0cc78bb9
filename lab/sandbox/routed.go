package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/pkg/source/kube"
)

// A routed sandbox (Config.Routed) is a small datacenter: the nodes sit in
// racks, each rack its own L2 segment (a bridge of its own in the underlay
// namespace) and its own subnets, and nothing but the router joins them.
// The router (the router namespace, also the way to the far host) has an
// interface in every rack, and the external client on a segment of its
// own (the old underlay subnet, bridge br0). BIRD (bird.go) runs in the
// router and holds an eBGP session with every node; the nodes learn of it
// from a NetworkBGPPeering per rack (the manifest directory, or the API) and
// advertise their pod CIDRs and Service addresses, which BIRD, accepting
// from each node only what that node may announce (bird.go), installs in
// the router's kernel (ECMP where several nodes announce one prefix).
// The nodes route everything they have no route for to their rack's
// router.

// Rack is one rack of a routed sandbox.
type Rack struct {
	Index  int    // 1..
	Name   string // r1: the nodes' label netcube.io/rack
	Bridge string // its L2 segment, in the underlay namespace: br-r1
	// RouterIf is the router's interface on the rack (in its namespace);
	// RouterPort the underlay's end of it, on Bridge.
	RouterIf, RouterPort string
	Net4, Net6           netip.Prefix
	Router4, Router6     netip.Addr // the router's address in the rack: the nodes' default gateway and BGP peer
	Nodes                []string
}

// RackLabel is the Node label that names a node's rack.
const RackLabel = "netcube.io/rack"

// The routed sandbox's ASNs: the router's, and every node's.
const (
	RouterASN = 64500
	NodeASN   = 64512
)

const (
	rackNet4   = "172.30.%d.%d"
	rackNet6   = "fd00:172:30:%d::%d"
	rackOffset = 10 // rack r is 172.30.<10+r>.0/24
	bgpGRTime  = "120s"
)

// RackName is the label value of rack r.
func RackName(r int) string { return fmt.Sprintf("r%d", r) }

// Routed says whether the sandbox is routed (Config.Routed).
func (t Topology) Routed() bool { return len(t.Racks) > 0 }

// Rack finds a rack by index.
func (t Topology) Rack(r int) (Rack, bool) {
	for _, k := range t.Racks {
		if k.Index == r {
			return k, true
		}
	}
	return Rack{}, false
}

// rack spreads the nodes over racks (node i in ((i-1) % racks) + 1) and
// gives them their racks' addresses.
func (t *Topology) rack(racks int) {
	if racks < 1 {
		racks = 1
	}
	for r := 1; r <= racks; r++ {
		t.Racks = append(t.Racks, Rack{
			Index:      r,
			Name:       RackName(r),
			Bridge:     fmt.Sprintf("br-r%d", r),
			RouterIf:   fmt.Sprintf("rack%d", r),
			RouterPort: fmt.Sprintf("rtr-r%d", r),
			Net4:       netip.MustParsePrefix(fmt.Sprintf(rackNet4, rackOffset+r, 0) + "/24"),
			Net6:       netip.MustParsePrefix(fmt.Sprintf(rackNet6, rackOffset+r, 0) + "/64"),
			Router4:    netip.MustParseAddr(fmt.Sprintf(rackNet4, rackOffset+r, routerIP)),
			Router6:    netip.MustParseAddr(fmt.Sprintf(rackNet6, rackOffset+r, routerIP)),
		})
	}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		r := i%racks + 1
		n.Rack = r
		n.IP4 = netip.MustParseAddr(fmt.Sprintf(rackNet4, rackOffset+r, nodeOffset+i+1))
		n.IP6 = netip.MustParseAddr(fmt.Sprintf(rackNet6, rackOffset+r, nodeOffset+i+1))
		t.Racks[r-1].Nodes = append(t.Racks[r-1].Nodes, n.Name)
	}
}

// checkRouted refuses what a routed sandbox does not support yet.
func (c Config) checkRouted() error {
	if !c.Routed {
		return nil
	}
	switch {
	case c.PodNetwork != "":
		return errors.New("--routed works with netcube's pod network only")
	case c.Racks < 1 || c.Racks > 200:
		return fmt.Errorf("racks: %d is not 1..200", c.Racks)
	}
	return nil
}

// buildRouted creates the routed underlay: a bridge per rack and one for
// the external client, the nodes in their racks, the router (with BIRD)
// between them and the far host behind it.
func buildRouted(t Topology, xdp bool) error {
	if err := steps(
		func() error { return ip("", "netns", "add", t.Underlay) },
		func() error { return ip(t.Underlay, "link", "set", "lo", "up") },
		// br0: the external client's segment, with the router's .254.
		func() error { return ip(t.Underlay, "link", "add", "br0", "type", "bridge") },
		func() error { return ip(t.Underlay, "link", "set", "br0", "up") },
	); err != nil {
		return err
	}
	for _, k := range t.Racks {
		if err := steps(
			func() error { return ip(t.Underlay, "link", "add", k.Bridge, "type", "bridge") },
			func() error { return ip(t.Underlay, "link", "set", k.Bridge, "up") },
		); err != nil {
			return fmt.Errorf("rack %s: %w", k.Name, err)
		}
	}
	for i, n := range t.Nodes {
		uplink := fmt.Sprintf("n%d", i+1)
		k := t.Racks[n.Rack-1]
		if err := steps(
			func() error { return ip("", "netns", "add", n.Netns) },
			func() error {
				return sysctl(n.Netns, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
					"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
					"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
			},
			func() error { return ip(n.Netns, "link", "set", "lo", "up") },
			func() error {
				return ip(t.Underlay, "link", "add", "name", uplink, "numtxqueues", "2", "numrxqueues", "2",
					"type", "veth", "peer", "name", "eth0", "numtxqueues", "2", "numrxqueues", "2", "netns", n.Netns)
			},
			func() error { return ip(t.Underlay, "link", "set", uplink, "master", k.Bridge, "up") },
			func() error { return ip(n.Netns, "addr", "add", n.IP4.String()+"/24", "dev", "eth0") },
			func() error { return ip(n.Netns, "-6", "addr", "add", n.IP6.String()+"/64", "dev", "eth0", "nodad") },
			func() error { return ip(n.Netns, "link", "set", "eth0", "up") },
			func() error { return ip(n.Netns, "route", "add", "default", "via", k.Router4.String()) },
			func() error { return ip(n.Netns, "-6", "route", "add", "default", "via", k.Router6.String()) },
		); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if err := buildExternal(t); err != nil {
		return fmt.Errorf("external client: %w", err)
	}
	if err := steps(
		func() error { return ip(t.External.Netns, "route", "add", "default", "via", t.Router.IP4.String()) },
		func() error {
			return ip(t.External.Netns, "-6", "route", "add", "default", "via", t.Router.IP6.String())
		},
	); err != nil {
		return fmt.Errorf("external client: %w", err)
	}
	if err := buildFar(t); err != nil { // the router namespace, on br0, and the far host
		return fmt.Errorf("router and far host: %w", err)
	}
	r := t.Router.Netns
	// ECMP by the flow's ports too (policy 1), as a datacenter router
	// hashes: the default (addresses only) sends every connection of one
	// client to one node.
	if err := sysctl(r, "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1"); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	for _, k := range t.Racks {
		if err := steps(
			func() error {
				return ip(t.Underlay, "link", "add", k.RouterPort, "type", "veth", "peer", "name", k.RouterIf, "netns", r)
			},
			func() error { return ip(t.Underlay, "link", "set", k.RouterPort, "master", k.Bridge, "up") },
			func() error { return ip(r, "addr", "add", k.Router4.String()+"/24", "dev", k.RouterIf) },
			func() error { return ip(r, "-6", "addr", "add", k.Router6.String()+"/64", "dev", k.RouterIf, "nodad") },
			func() error { return ip(r, "link", "set", k.RouterIf, "up") },
		); err != nil {
			return fmt.Errorf("router, rack %s: %w", k.Name, err)
		}
	}
	if xdp {
		if err := xdpWire(t); err != nil {
			return err
		}
	}
	if err := startBird(t); err != nil {
		return fmt.Errorf("BIRD: %w", err)
	}
	return nil
}

// BGPPeeringsYAML renders the NetworkBGPPeering of every rack: its nodes
// (by their rack label) peer with the rack's router.
func (t Topology) BGPPeeringsYAML() string {
	var b strings.Builder
	for i, k := range t.Racks {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: netcube.io/v1alpha1\nkind: NetworkBGPPeering\nmetadata:\n  name: rack%d\nspec:\n", k.Index)
		fmt.Fprintf(&b, "  nodeSelector:\n    matchLabels: {%s: %s}\n  localASN: %d\n  peers:\n", RackLabel, k.Name, NodeASN)
		fmt.Fprintf(&b, "  - address: %s\n    asn: %d\n    holdTime: %s\n    keepaliveTime: %s\n    gracefulRestart: {enabled: true, restartTime: %s}\n",
			k.Router4, RouterASN, t.BGPHold, t.BGPHold/3, bgpGRTime)
		b.WriteString("  advertise: {podCIDRs: true, loadBalancerIPs: true, externalIPs: true}\n")
	}
	return b.String()
}

// createBGPPeerings creates the racks' NetworkBGPPeerings through the
// API (a sandbox with an API server), once their CRD is served.
func createBGPPeerings(rc *rest.Config, t Topology) error {
	d, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(t.BGPPeeringsYAML(), "---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return fmt.Errorf("the racks' NetworkBGPPeerings: %w", err)
		}
		if err := createOnceServed(d.Resource(kube.NetworkBGPPeerings), obj); err != nil {
			return err
		}
	}
	return nil
}

// routeUnderlayThroughRouter routes the underlay (the API server's and the
// e2e client's namespace, on br0 with the external client) through the
// router, as a host outside the racks is: the nodes' subnets are the
// router's, their pods and Service addresses the routes BGP gave it. The
// router sends the LoadBalancer client addresses back to the underlay.
func routeUnderlayThroughRouter(t Topology) error {
	var fs []func() error
	for i, c := range []netip.Prefix{lbClient4, lbClient6} {
		family, router, underlay := "-4", t.Router.IP4, apiServerIP4
		if i == 1 {
			family, router, underlay = "-6", t.Router.IP6, apiServerIP6
		}
		fs = append(fs,
			func() error { return ip(t.Underlay, family, "route", "add", "default", "via", router.String()) },
			func() error { return ip(t.Underlay, family, "addr", "add", c.String(), "dev", "lo") },
			// What the underlay sends to the pool leaves from the client
			// address, as in a flat sandbox; the router's BGP routes decide
			// which node it reaches.
			func() error {
				return ip(t.Underlay, family, "route", "add", DefaultLBPoolCIDRs[i], "via", router.String(), "src", c.Addr().String())
			},
			func() error { return ip(t.Router.Netns, family, "route", "add", c.String(), "via", underlay.String()) },
		)
	}
	return steps(fs...)
}

// writeRoutedManifests writes the racks' NetworkBGPPeerings.
func writeRoutedManifests(t Topology) error {
	if !t.Routed() {
		return nil
	}
	return t.WriteManifest("bgp.yaml", "# The racks' BGP peerings: every node peers with its rack's router (BIRD, AS "+
		fmt.Sprint(RouterASN)+").\n"+t.BGPPeeringsYAML())
}

// RouterRoutes returns the routes BIRD installed in the router's kernel
// for family 4 or 6: prefix -> next hops (sorted; several for ECMP).
func (sb *Sandbox) RouterRoutes(family int) (map[string][]string, error) {
	return sb.Topology.RouterRoutes(family)
}

// RouterRoutes is Sandbox.RouterRoutes.
func (t Topology) RouterRoutes(family int) (map[string][]string, error) {
	args := []string{"-n", t.Router.Netns, "-j"}
	switch family {
	case 4:
		args = append(args, "-4")
	case 6:
		args = append(args, "-6")
	default:
		return nil, fmt.Errorf("family %d is not 4 or 6", family)
	}
	out, err := exec.Command("ip", append(args, "route", "show", "proto", "bird")...).Output()
	if err != nil {
		return nil, fmt.Errorf("ip route in %s: %w", t.Router.Netns, err)
	}
	return parseBirdRoutes(out, family)
}

// parseBirdRoutes reads `ip -j route show`: prefix -> sorted gateways.
func parseBirdRoutes(out []byte, family int) (map[string][]string, error) {
	type hop struct {
		Gateway string `json:"gateway"`
		Dev     string `json:"dev"`
	}
	var routes []struct {
		Dst      string `json:"dst"`
		Gateway  string `json:"gateway"`
		Dev      string `json:"dev"`
		Nexthops []hop  `json:"nexthops"`
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		return map[string][]string{}, nil
	}
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("ip -j route: %w", err)
	}
	m := map[string][]string{}
	for _, r := range routes {
		dst := r.Dst
		if dst == "default" {
			if family == 4 {
				dst = "0.0.0.0/0"
			} else {
				dst = "::/0"
			}
		}
		if !strings.Contains(dst, "/") {
			if family == 4 {
				dst += "/32"
			} else {
				dst += "/128"
			}
		}
		if p, err := netip.ParsePrefix(dst); err == nil {
			dst = p.Masked().String()
		}
		var hops []string
		if r.Gateway != "" {
			hops = append(hops, r.Gateway)
		} else if len(r.Nexthops) == 0 && r.Dev != "" {
			hops = append(hops, "dev "+r.Dev)
		}
		for _, h := range r.Nexthops {
			if h.Gateway != "" {
				hops = append(hops, h.Gateway)
			} else if h.Dev != "" {
				hops = append(hops, "dev "+h.Dev)
			}
		}
		slices.Sort(hops)
		m[dst] = append(m[dst], hops...)
	}
	return m, nil
}
