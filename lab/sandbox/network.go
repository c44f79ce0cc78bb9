package sandbox

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/netcube/netcube/pkg/cni"
)

// buildNetwork creates the underlay and the nodes. Routes to other nodes'
// pods are the agents' (from the Node objects); pods come from the CNI
// plugin (addPod), once the agents run.
func buildNetwork(t Topology, xdp bool) error {
	if t.Routed() {
		return buildRouted(t, xdp)
	}
	if err := steps(
		func() error { return ip("", "netns", "add", t.Underlay) },
		func() error { return ip(t.Underlay, "link", "set", "lo", "up") },
		func() error { return ip(t.Underlay, "link", "add", "br0", "type", "bridge") },
		func() error { return ip(t.Underlay, "link", "set", "br0", "up") },
	); err != nil {
		return err
	}
	for i, n := range t.Nodes {
		uplink := fmt.Sprintf("n%d", i+1)
		if err := steps(
			func() error { return ip("", "netns", "add", n.Netns) },
			func() error {
				return sysctl(n.Netns, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
					"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
					"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
			},
			func() error { return ip(n.Netns, "link", "set", "lo", "up") },
			func() error {
				// Two queues each way, as a NIC has several: the qos cube
				// gives network slices' latency class a queue of its own.
				return ip(t.Underlay, "link", "add", "name", uplink, "numtxqueues", "2", "numrxqueues", "2",
					"type", "veth", "peer", "name", "eth0", "numtxqueues", "2", "numrxqueues", "2", "netns", n.Netns)
			},
			func() error { return ip(t.Underlay, "link", "set", uplink, "master", "br0", "up") },
			func() error { return ip(n.Netns, "addr", "add", n.IP4.String()+"/24", "dev", "eth0") },
			func() error { return ip(n.Netns, "-6", "addr", "add", n.IP6.String()+"/64", "dev", "eth0", "nodad") },
			func() error { return ip(n.Netns, "link", "set", "eth0", "up") },
		); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if err := buildExternal(t); err != nil {
		return fmt.Errorf("external client: %w", err)
	}
	if err := buildFar(t); err != nil {
		return fmt.Errorf("router and far host: %w", err)
	}
	if xdp {
		return xdpWire(t)
	}
	return nil
}

// buildFar puts a router on the underlay and a host behind it, over a
// link of FarMTU: the internet as a pod meets it, more than one hop away
// (traceroute) and over a smaller MTU (PMTU discovery). The router
// answers every error at once (no ICMP rate limit); the nodes route the
// far network through it.
func buildFar(t Topology) error {
	r, f := t.Router, t.Far
	r4, r6 := fmt.Sprintf(farNet4, 1), fmt.Sprintf(farNet6, 1)
	mtu := fmt.Sprint(FarMTU)
	err := steps(
		func() error { return ip("", "netns", "add", r.Netns) },
		func() error { return ip("", "netns", "add", f.Netns) },
		func() error {
			return sysctl(r.Netns, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
				"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
				"net.ipv4.icmp_ratelimit=0", "net.ipv6.icmp.ratelimit=0")
		},
		func() error {
			return sysctl(f.Netns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
				"net.ipv4.icmp_ratelimit=0", "net.ipv6.icmp.ratelimit=0")
		},
		func() error { return ip(r.Netns, "link", "set", "lo", "up") },
		func() error { return ip(f.Netns, "link", "set", "lo", "up") },
		func() error {
			return ip(t.Underlay, "link", "add", "rtr", "type", "veth", "peer", "name", "eth0", "netns", r.Netns)
		},
		func() error { return ip(t.Underlay, "link", "set", "rtr", "master", "br0", "up") },
		func() error { return ip(r.Netns, "addr", "add", r.IP4.String()+"/24", "dev", "eth0") },
		func() error { return ip(r.Netns, "-6", "addr", "add", r.IP6.String()+"/64", "dev", "eth0", "nodad") },
		func() error { return ip(r.Netns, "link", "set", "eth0", "up") },
		func() error {
			return ip(r.Netns, "link", "add", "far", "mtu", mtu, "type", "veth", "peer", "name", "eth0", "mtu", mtu, "netns", f.Netns)
		},
		func() error { return ip(r.Netns, "addr", "add", r4+"/24", "dev", "far") },
		func() error { return ip(r.Netns, "-6", "addr", "add", r6+"/64", "dev", "far", "nodad") },
		func() error { return ip(r.Netns, "link", "set", "far", "up") },
		func() error { return ip(f.Netns, "addr", "add", f.IP4.String()+"/24", "dev", "eth0") },
		func() error { return ip(f.Netns, "-6", "addr", "add", f.IP6.String()+"/64", "dev", "eth0", "nodad") },
		func() error { return ip(f.Netns, "link", "set", "eth0", "up") },
		func() error { return ip(f.Netns, "route", "add", "default", "via", r4) },
		func() error { return ip(f.Netns, "-6", "route", "add", "default", "via", r6) },
	)
	if err != nil {
		return err
	}
	if t.Routed() { // the nodes' default routes lead to the router
		return nil
	}
	for _, n := range t.Nodes {
		if err := steps(
			func() error { return ip(n.Netns, "route", "add", fmt.Sprintf(farNet4, 0)+"/24", "via", r.IP4.String()) },
			func() error {
				return ip(n.Netns, "-6", "route", "add", fmt.Sprintf(farNet6, 0)+"/64", "via", r.IP6.String())
			},
		); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

// buildExternal puts a client outside the cluster on the underlay: it knows
// the nodes' addresses, nothing of pods or Services.
func buildExternal(t Topology) error {
	h := t.External
	return steps(
		func() error { return ip("", "netns", "add", h.Netns) },
		func() error {
			return sysctl(h.Netns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		},
		func() error { return ip(h.Netns, "link", "set", "lo", "up") },
		func() error {
			return ip(t.Underlay, "link", "add", "ext", "type", "veth", "peer", "name", "eth0", "netns", h.Netns)
		},
		func() error { return ip(t.Underlay, "link", "set", "ext", "master", "br0", "up") },
		func() error { return ip(h.Netns, "addr", "add", h.IP4.String()+"/24", "dev", "eth0") },
		func() error { return ip(h.Netns, "-6", "addr", "add", h.IP6.String()+"/64", "dev", "eth0", "nodad") },
		func() error { return ip(h.Netns, "link", "set", "eth0", "up") },
	)
}

// RouteFromExternal makes the external client send traffic for prefix
// (an ExternalIP, a LoadBalancer IP) to node, as a router or a load
// balancer in front of the cluster would.
func (t Topology) RouteFromExternal(prefix netip.Prefix, node string) error {
	for _, n := range t.Nodes {
		if n.Name != node {
			continue
		}
		via := n.IP4
		if prefix.Addr().Is6() {
			via = n.IP6
		}
		if t.Routed() { // the node is not on the client's segment: the router (and its BGP routes) decides
			via = t.Router.IP4
			if prefix.Addr().Is6() {
				via = t.Router.IP6
			}
		}
		return ip(t.External.Netns, "route", "replace", prefix.String(), "via", via.String())
	}
	return fmt.Errorf("no node %q", node)
}

// AddPodAddress gives a pod another IPv4 and IPv6 address, routed like its
// first (the benchmarks use it so that direct and Service flows from one
// client never share a tuple), and tells the node's agent, as the CNI
// plugin does for a new pod, so its router delivers to them as to the
// first.
func (t Topology) AddPodAddress(pod string, ip4, ip6 netip.Addr) error {
	p, ok := t.Pod(pod)
	if !ok {
		return fmt.Errorf("no pod %q", pod)
	}
	node := t.Nodes[0]
	for _, n := range t.Nodes {
		if n.Name == p.Node {
			node = n
		}
	}
	mac, err := podMAC(p)
	if err != nil {
		return err
	}
	return steps(
		func() error { return ip(p.Netns, "addr", "add", ip4.String()+"/32", "dev", "eth0") },
		func() error { return ip(p.Netns, "-6", "addr", "add", ip6.String()+"/128", "dev", "eth0", "nodad") },
		func() error { return ip(node.Netns, "route", "add", ip4.String()+"/32", "dev", p.HostIf) },
		func() error { return ip(node.Netns, "-6", "route", "add", ip6.String()+"/128", "dev", p.HostIf) },
		func() error {
			return ip(node.Netns, "neigh", "replace", ip4.String(), "lladdr", mac, "dev", p.HostIf, "nud", "permanent")
		},
		func() error {
			return ip(node.Netns, "-6", "neigh", "replace", ip6.String(), "lladdr", mac, "dev", p.HostIf, "nud", "permanent")
		},
		func() error {
			// An agent that is down reads the neighbours when it starts.
			err := cni.NotifyPod(t.cniSocket(node), cni.Pod{ContainerID: containerID(p), IfName: "eth0", HostIf: p.HostIf,
				Addrs: []netip.Addr{p.IP4, p.IP6, ip4, ip6}})
			if errors.Is(err, cni.ErrAgentDown) {
				return nil
			}
			return err
		},
	)
}
