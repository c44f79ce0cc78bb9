package policy

import (
	"fmt"
	"iter"
	"maps"
	"slices"

	"github.com/netcube/netcube/pkg/model"
)

// recompile puts in the entries and selections policy id gives now (none:
// deleted), its peers matched anew, and then takes out those it gave: an
// entry in both is never removed, nor written again. Pods whose endpoint
// may change are added to touched.
func (c *Compiler) recompile(id model.PolicyID, touched map[model.PodID]struct{}) {
	old := c.policies[id]
	if old != nil {
		c.unindex(old)
	}
	if pol := c.cl.Policies[id]; pol != nil {
		ps := &policyState{pol: pol, byPod: map[model.PodID]*selection{}, blocks: policyBlocks(pol)}
		c.policies[id] = ps
		c.index(ps)
		for pid := range c.localByNS[id.Namespace] {
			c.reselect(ps, pid, touched)
		}
	}
	if old != nil {
		for pid, sel := range old.byPod {
			c.release(old, pid, sel, touched)
		}
	}
}

// reselect brings what policy ps gives this node's pod pid up to the pod
// as it is now (selected or not, its labels and ports), with the peers
// the policy has matched: the new selection in (its rule set's, compiled
// if the set has none yet), then the old one out.
func (c *Compiler) reselect(ps *policyState, pid model.PodID, touched map[model.PodID]struct{}) {
	old := ps.byPod[pid]
	delete(ps.byPod, pid)
	defer func() {
		if old != nil {
			c.release(ps, pid, old, touched)
		}
	}()
	pod := c.pods[pid]
	if pod == nil || !pod.local || !ps.pol.Pods.Matches(labelSet(pod.pod.Labels)) {
		return
	}
	pol, p := ps.pol, pod.pod
	es := c.eps[pid]
	if es == nil {
		es = &endpointState{id: c.endpointID(pid)}
		c.eps[pid] = es
	}
	es.selectors++
	if pol.IsolatesIngress {
		es.ingress++
	}
	if pol.IsolatesEgress {
		es.egress++
	}
	sel := ps.bySet.of(pod.ruleSet)
	if sel == nil {
		sel = c.compileSelection(ps, pod.ruleSet, p)
		ps.bySet = append(ps.bySet, sel)
	}
	sel.pods++
	ps.byPod[pid] = sel
	touched[pid] = struct{}{}
	if len(sel.warnings) > 0 {
		c.warningsChanged = true
	}
}

// compileSelection compiles what policy ps gives rule set rs (pod self's)
// and counts its entries in.
func (c *Compiler) compileSelection(ps *policyState, rs uint32, self *model.Pod) *selection {
	pol := ps.pol
	sel := &selection{ruleSet: rs, self: self, entries: map[Entry]struct{}{}}
	warned := map[string]bool{}
	if pol.IsolatesIngress {
		for i := range pol.Ingress {
			c.addRule(sel.entries, &ps.peers, pol, &pol.Ingress[i], rs, Ingress, self, warned)
		}
	}
	if pol.IsolatesEgress {
		for i := range pol.Egress {
			c.addRule(sel.entries, &ps.peers, pol, &pol.Egress[i], rs, Egress, self, warned)
		}
	}
	for e := range sel.entries {
		c.ref(e)
	}
	sel.warnings = slices.Sorted(maps.Keys(warned))
	return sel
}

// release takes out what policy ps gave pod pid (sel, its rule set's
// selection: counted out with the set's last pod).
func (c *Compiler) release(ps *policyState, pid model.PodID, sel *selection, touched map[model.PodID]struct{}) {
	pol := ps.pol
	if sel.pods--; sel.pods == 0 {
		for e := range sel.entries {
			c.unref(e)
		}
		ps.bySet.remove(sel)
	}
	es := c.eps[pid]
	es.selectors--
	if pol.IsolatesIngress {
		es.ingress--
	}
	if pol.IsolatesEgress {
		es.egress--
	}
	touched[pid] = struct{}{}
	if len(sel.warnings) > 0 {
		c.warningsChanged = true
	}
}

// addRule adds to entries those of one rule of pol for rule set rs (pod
// self); a named port no pod has is a warning.
func (c *Compiler) addRule(entries map[Entry]struct{}, peerSets *rulePeers, pol *model.Policy,
	r *model.PolicyRule, rs uint32, dir Direction, self *model.Pod, warned map[string]bool) {
	peers, ok := peerSets.of(r)
	if !ok {
		peers = c.peersOf(pol, r)
		peerSets.set(r, peers)
	}
	add := func(e Entry) { entries[e] = struct{}{} }
	if missing := c.addRulePeers(add, peers, pol, r, rs, dir, self); warned != nil {
		for _, port := range missing {
			warned[fmt.Sprintf("%s port %q (%s) is a port of no pod it applies to; it allows nothing",
				dir, port.Name, port.Proto)] = true
		}
	}
}

// addRulePeers calls add with the entries of rule r of pol with the
// given peers for rule set rs (pod self's), the same entry perhaps more
// than once, and returns the named ports no pod has.
func (c *Compiler) addRulePeers(add func(Entry), peers []*class, pol *model.Policy,
	r *model.PolicyRule, rs uint32, dir Direction, self *model.Pod) (missing []model.PolicyPort) {
	if len(r.Ports) == 0 {
		for _, pc := range peers {
			add(Entry{RuleSet: rs, Dir: dir, Peer: pc.id})
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
				addRange(add, Entry{RuleSet: rs, Dir: dir, Proto: port.Proto, Peer: pc.id}, lo, hi)
			}
			continue
		}
		// A named port is the destination pod's: the endpoint itself for
		// ingress, each peer pod for egress (every pod, for a rule
		// allowing every peer). An ingress port is found or not whatever
		// the peers: so a class made or emptied never changes it
		// (classChanged relies on this).
		found := false
		addOwner := func(pc *class, o *model.Pod) {
			for _, np := range o.Ports {
				if np.Name == port.Name && np.Proto == port.Proto {
					addRange(add, Entry{RuleSet: rs, Dir: dir, Proto: port.Proto, Peer: pc.id}, np.Port, np.Port)
					found = true
				}
			}
		}
		if dir == Ingress {
			found = hasPort(self, port)
		}
		for _, pc := range peers {
			switch {
			case dir == Ingress:
				addOwner(pc, self)
			case pc.id == AnyPeer:
				for _, o := range c.pods {
					addOwner(pc, o.pod)
				}
			default:
				for pid := range pc.members {
					addOwner(pc, c.pods[pid].pod)
				}
			}
		}
		if !found {
			missing = append(missing, port)
		}
	}
	return missing
}

// hasPort says whether pod p has the named port.
func hasPort(p *model.Pod, port model.PolicyPort) bool {
	return slices.ContainsFunc(p.Ports, func(np model.NamedPort) bool { return np.Name == port.Name && np.Proto == port.Proto })
}

// anyPeer is the class of a rule with no peers: every address.
var anyPeer = &class{id: AnyPeer}

// peersOf is the classes a rule allows: every one (anyPeer), or those
// some peer of it matches. Selector peers look only at the classes of the
// namespaces they select.
func (c *Compiler) peersOf(pol *model.Policy, r *model.PolicyRule) []*class {
	if len(r.Peers) == 0 {
		return []*class{anyPeer}
	}
	in := map[*class]struct{}{}
	for i := range r.Peers {
		peer := &r.Peers[i]
		if peer.Block != nil {
			for _, k := range c.classes {
				if k.inBlock(peer.Block) {
					in[k] = struct{}{}
				}
			}
			continue
		}
		for ns, classes := range c.byNS {
			if !c.peerNamespace(pol, peer, ns) {
				continue
			}
			for k := range classes {
				if peer.Pods.Matches(labelSet(k.labels)) {
					in[k] = struct{}{}
				}
			}
		}
	}
	return slices.Collect(maps.Keys(in))
}

// peersMatch says whether some peer of r (a rule of pol) matches class k.
func (c *Compiler) peersMatch(pol *model.Policy, r *model.PolicyRule, k *class) bool {
	for i := range r.Peers {
		peer := &r.Peers[i]
		if peer.Block != nil {
			if k.inBlock(peer.Block) {
				return true
			}
			continue
		}
		if k.members != nil && c.peerNamespace(pol, peer, k.ns) && peer.Pods.Matches(labelSet(k.labels)) {
			return true
		}
	}
	return false
}

// peerNamespace says whether a selector peer of pol looks in namespace
// ns: the policy's own, or one its namespaceSelector matches.
func (c *Compiler) peerNamespace(pol *model.Policy, peer *model.PolicyPeer, ns string) bool {
	if peer.Namespaces == nil {
		return ns == pol.ID.Namespace
	}
	return peer.Namespaces.Matches(labelSet(c.cl.nsLabels(ns)))
}

// addRange adds the entries of e for the ports lo-hi: the fewest prefixes
// covering the range exactly.
func addRange(add func(Entry), e Entry, lo, hi uint16) {
	for p := range portPrefixes(lo, hi) {
		e.Port, e.PortBits = p.port, p.bits
		add(e)
	}
}

type portPrefix struct {
	port uint16
	bits uint8
}

// portPrefixes splits lo-hi into aligned power-of-two blocks. A sequence,
// not a list: a new identity's entries take it for every range rule it
// meets, with nothing allocated.
func portPrefixes(lo, hi uint16) iter.Seq[portPrefix] {
	return func(yield func(portPrefix) bool) {
		for l := uint32(lo); l <= uint32(hi); {
			size := uint32(1)
			bits := uint8(16)
			// Grow while aligned and inside the range.
			for bits > 0 && l%(size*2) == 0 && l+size*2-1 <= uint32(hi) {
				size *= 2
				bits--
			}
			if !yield(portPrefix{port: uint16(l), bits: bits}) {
				return
			}
			l += size
		}
	}
}
