package policy

import (
	"fmt"
	"net/netip"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Direction is the side of a pod a policy entry guards.
type Direction uint8

const (
	Ingress = Direction(datapath.PolicyIngress) // traffic the pod receives
	Egress  = Direction(datapath.PolicyEgress)  // traffic the pod sends
)

func (d Direction) String() string {
	if d == Ingress {
		return "ingress"
	}
	return "egress"
}

// Endpoint is a pod of this node as the datapath knows it: its number in
// the policy entries, and the directions some policy isolates it in (a
// direction no policy isolates is not looked up at all).
type Endpoint struct {
	ID                              uint32
	IsolatedIngress, IsolatedEgress bool
}

// Entry allows an endpoint's traffic in one direction with a peer identity
// (AnyPeer: every peer), protocol (0: every protocol, every port) and the
// ports whose first PortBits bits are Port's (16: Port alone; 0: every
// port): a port range is a few such prefixes, as a longest-prefix-match
// table holds them.
type Entry struct {
	Endpoint uint32
	Dir      Direction
	Proto    model.Proto
	Peer     Identity
	Port     uint16
	PortBits uint8
}

// Tables are what the policy cube writes to the datapath for one node.
type Tables struct {
	// Peers maps addresses to identities (the identity cache): each pod
	// address, each IP block region, this node's addresses (Host).
	// Addresses in none are World.
	Peers map[netip.Prefix]Identity
	// Endpoints are this node's policy-enforcing pods, by address.
	Endpoints map[netip.Addr]Endpoint
	// Entries are the allowed (endpoint, direction, peer, port) tuples.
	Entries map[Entry]struct{}
	// Warnings name what matches nothing (a named port no destination pod
	// has): not errors, but likely not what the author meant.
	Warnings []Warning
}

// Warning is something of a policy that matches nothing.
type Warning struct {
	Policy model.PolicyID
	Msg    string
}

// Compiler turns the cluster into one node's tables, keeping identities
// and endpoint numbers stable from one compilation to the next.
type Compiler struct {
	ids       *Identities
	endpoints map[model.PodID]uint32
	nextEP    uint32
	peerSets  map[*model.PolicyRule][]*class // this compilation's, by rule
	// podClasses are this compilation's pod classes by namespace.
	podClasses map[string][]*class
	// classes and last are the last compilation's classes and tables
	// (PoliciesOf).
	classes []*class
	last    *Tables
}

// NewCompiler returns a compiler with no identities handed out yet.
func NewCompiler() *Compiler {
	return &Compiler{ids: NewIdentities(), endpoints: map[model.PodID]uint32{}, nextEP: 1}
}

// PodOf names the pod an endpoint number was given to.
func (c *Compiler) PodOf(ep uint32) (model.PodID, bool) {
	for id, n := range c.endpoints {
		if n == ep {
			return id, true
		}
	}
	return model.PodID{}, false
}

func (c *Compiler) endpointID(id model.PodID) uint32 {
	if n, ok := c.endpoints[id]; ok {
		return n
	}
	n := c.nextEP
	c.nextEP++
	c.endpoints[id] = n
	return n
}

// Compile computes the tables of the node whose pods local says, and
// whose own addresses are hostAddrs.
func (c *Compiler) Compile(cl *Cluster, local func(*model.Pod) bool, hostAddrs []netip.Addr) *Tables {
	policies := cl.sortedPolicies()
	pods := cl.sortedPods()
	blocks := blocksOf(policies)
	t := &Tables{Peers: map[netip.Prefix]Identity{}, Endpoints: map[netip.Addr]Endpoint{}, Entries: map[Entry]struct{}{}}

	// Classes: every pod address, every block region.
	var classes []*class
	c.podClasses = map[string][]*class{}
	for _, p := range pods {
		if p.HostNetwork {
			continue // its addresses are its node's
		}
		for _, a := range p.IPs {
			sig := blocks.signature(a)
			id := c.ids.of("pod\x00" + p.ID.Namespace + "\x00" + labelsKey(p.Labels) + "\x00" + sigKey(sig))
			pc := &class{id: id, pod: p, sig: sig}
			classes = append(classes, pc)
			c.podClasses[p.ID.Namespace] = append(c.podClasses[p.ID.Namespace], pc)
			t.Peers[netip.PrefixFrom(a, a.BitLen())] = id
		}
	}
	for _, b := range blocks {
		sig := blocks.signatureOf(b)
		id := c.ids.of("world\x00" + sigKey(sig))
		classes = append(classes, &class{id: id, sig: sig})
		t.Peers[b] = id
	}
	for _, a := range hostAddrs {
		t.Peers[netip.PrefixFrom(a, a.BitLen())] = Host
	}

	// Endpoints, and the entries of each. A rule's peers do not depend on
	// the endpoint: matched once per rule (peerSets).
	byNamespace := map[string][]*model.Policy{}
	for _, pol := range policies {
		byNamespace[pol.ID.Namespace] = append(byNamespace[pol.ID.Namespace], pol)
	}
	c.peerSets = map[*model.PolicyRule][]*class{}
	for _, p := range pods {
		if p.HostNetwork || !local(p) {
			continue
		}
		ep := Endpoint{ID: c.endpointID(p.ID)}
		selected := false
		for _, pol := range byNamespace[p.ID.Namespace] {
			if !pol.Pods.Matches(labelSet(p.Labels)) {
				continue
			}
			selected = true
			if pol.IsolatesIngress {
				ep.IsolatedIngress = true
				for i := range pol.Ingress {
					c.addRule(t, cl, classes, pol, &pol.Ingress[i], ep.ID, Ingress, p)
				}
			}
			if pol.IsolatesEgress {
				ep.IsolatedEgress = true
				for i := range pol.Egress {
					c.addRule(t, cl, classes, pol, &pol.Egress[i], ep.ID, Egress, p)
				}
			}
		}
		if !selected {
			continue // no policy selects it: not looked up further
		}
		for _, a := range p.IPs {
			t.Endpoints[a] = ep
		}
	}
	c.classes, c.last = classes, t
	return t
}

// addRule adds the entries of one rule of pol for endpoint ep (pod self).
func (c *Compiler) addRule(t *Tables, cl *Cluster, classes []*class, pol *model.Policy, r *model.PolicyRule,
	ep uint32, dir Direction, self *model.Pod) {
	peers := c.peersOf(cl, classes, pol, r)
	if len(r.Ports) == 0 {
		for _, pc := range peers {
			t.Entries[Entry{Endpoint: ep, Dir: dir, Peer: pc.id}] = struct{}{}
		}
		return
	}
	for _, port := range r.Ports {
		if port.Name == "" {
			lo, hi := port.Port, port.EndPort
			if lo == 0 {
				lo, hi = 0, 65535
			} else if hi == 0 {
				hi = lo
			}
			for _, pc := range peers {
				addRange(t, Entry{Endpoint: ep, Dir: dir, Proto: port.Proto, Peer: pc.id}, lo, hi)
			}
			continue
		}
		// A named port is the destination pod's: the endpoint itself for
		// ingress, each peer for egress (every pod, for a rule allowing
		// every peer).
		found := false
		for _, pc := range peers {
			var owners []*model.Pod
			switch {
			case dir == Ingress:
				owners = []*model.Pod{self}
			case pc.pod != nil:
				owners = []*model.Pod{pc.pod}
			case pc.id == AnyPeer:
				owners = cl.sortedPods()
			}
			for _, o := range owners {
				for _, np := range o.Ports {
					if np.Name == port.Name && np.Proto == port.Proto {
						addRange(t, Entry{Endpoint: ep, Dir: dir, Proto: port.Proto, Peer: pc.id}, np.Port, np.Port)
						found = true
					}
				}
			}
		}
		if !found {
			t.Warnings = append(t.Warnings, Warning{pol.ID, fmt.Sprintf("%s port %q (%s) is a port of no pod it applies to; it allows nothing",
				dir, port.Name, port.Proto)})
		}
	}
}

// peersOf is the classes a rule allows: every one (AnyPeer), or those some
// peer of it matches; computed once per rule and compilation. Selector
// peers look only at the pods of the namespaces they select.
func (c *Compiler) peersOf(cl *Cluster, classes []*class, pol *model.Policy, r *model.PolicyRule) []*class {
	if peers, ok := c.peerSets[r]; ok {
		return peers
	}
	if len(r.Peers) == 0 {
		peers := []*class{{id: AnyPeer}}
		c.peerSets[r] = peers
		return peers
	}
	in := map[*class]bool{}
	for i := range r.Peers {
		peer := &r.Peers[i]
		if peer.Block != nil {
			for _, cl0 := range classes {
				if cl0.inBlock(peer.Block) {
					in[cl0] = true
				}
			}
			continue
		}
		for _, ns := range c.namespacesOf(cl, pol, peer) {
			for _, cl0 := range c.podClasses[ns] {
				if peer.Pods.Matches(labelSet(cl0.pod.Labels)) {
					in[cl0] = true
				}
			}
		}
	}
	var peers []*class
	for _, cl0 := range classes { // in the classes' (stable) order
		if in[cl0] {
			peers = append(peers, cl0)
		}
	}
	c.peerSets[r] = peers
	return peers
}

// namespacesOf is the namespaces a selector peer of pol looks in: the
// policy's own, or those its namespaceSelector matches.
func (c *Compiler) namespacesOf(cl *Cluster, pol *model.Policy, peer *model.PolicyPeer) []string {
	if peer.Namespaces == nil {
		return []string{pol.ID.Namespace}
	}
	var out []string
	for ns := range c.podClasses {
		if peer.Namespaces.Matches(labelSet(cl.nsLabels(ns))) {
			out = append(out, ns)
		}
	}
	return out
}

// addRange adds the entries of e for the ports lo-hi: the fewest prefixes
// covering the range exactly.
func addRange(t *Tables, e Entry, lo, hi uint16) {
	for _, p := range portPrefixes(lo, hi) {
		e.Port, e.PortBits = p.port, p.bits
		t.Entries[e] = struct{}{}
	}
}

type portPrefix struct {
	port uint16
	bits uint8
}

// portPrefixes splits lo-hi into aligned power-of-two blocks.
func portPrefixes(lo, hi uint16) []portPrefix {
	var out []portPrefix
	for l := uint32(lo); l <= uint32(hi); {
		size := uint32(1)
		bits := uint8(16)
		// Grow while aligned and inside the range.
		for bits > 0 && l%(size*2) == 0 && l+size*2-1 <= uint32(hi) {
			size *= 2
			bits--
		}
		out = append(out, portPrefix{port: uint16(l), bits: bits})
		l += size
	}
	return out
}
