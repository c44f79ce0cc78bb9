package policy

// What compileTiers keeps of its last pass, so that a pass computes again
// only the functions whose inputs changed. A tier set's function for a
// peer, in one direction, depends on nothing but:
//
//   - the set: its ClusterNetworkPolicies in order, whether NetworkPolicy
//     isolates it, its pods' named ports (ingress), NetworkPolicy's
//     entries of its rule set for any peer;
//   - the peer: its class (namespace, labels, addresses), its
//     namespace's labels, its pods' named ports (egress), NetworkPolicy's
//     entries of the set's rule set for it;
//   - the cluster's nodes and this node's addresses (nodes peers), for
//     every function.
//
// A ClusterNetworkPolicy edited is a new object in the sets its subject
// selects, so only those compute again; a pod relabelled changes the
// columns of the classes it left and joined. Cluster objects are
// replaced, never changed in place (the reconciler makes a new one for
// each event), so comparing them as pointers and maps as read is enough.

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"github.com/netcube/netcube/pkg/model"
)

// columnKey names one tier set's direction.
type columnKey struct {
	set uint32
	dir Direction
}

// tierColumns are one tier set's direction as last computed: its inputs,
// the function for any peer and for each peer a rule may tell apart, and
// the entries written from them.
type tierColumns struct {
	in    setInputs
	stale bool       // the nodes or this node's addresses changed: compute all again
	any   tierColumn // for any peer (AnyPeer's entries)
	peers map[Identity]*tierColumn
}

// setInputs are what every function of a tier set's direction reads.
type setInputs struct {
	policies   []*model.ClusterPolicy
	npIsolated bool
	ports      []model.NamedPort // the set's pods' (ingress: named ports of the rules)
	anyOwn     []Entry           // NetworkPolicy's entries of the set's rule set for any peer
}

func (a *setInputs) equal(b *setInputs) bool {
	return a.npIsolated == b.npIsolated && slices.Equal(a.policies, b.policies) && slices.Equal(a.ports, b.ports) &&
		slices.Equal(a.anyOwn, b.anyOwn)
}

// tierColumn is one peer's function (nil: the peer is as any peer, no
// rule naming it and no entry of NetworkPolicy's for it) with what it
// was computed from and the conflicts computing it found.
type tierColumn struct {
	peer      peerInputs
	f         *portFunc
	conflicts []TierConflict
	entries   map[Entry]bool // written: the function's, where it differs from any peer's
}

// peerInputs are what a peer's function reads of the peer.
type peerInputs struct {
	key      string // its class's: namespace, labels, addresses
	nsLabels map[string]string
	ports    []model.NamedPort // its pods' (egress)
	own      []Entry           // NetworkPolicy's entries of the set's rule set for it
}

func (a *peerInputs) equal(b *peerInputs) bool {
	return a.key == b.key && maps.Equal(a.nsLabels, b.nsLabels) && slices.Equal(a.ports, b.ports) && slices.Equal(a.own, b.own)
}

// tierGlobals are the inputs of every function: the cluster's nodes (a
// rule's nodes peers) and this node's addresses.
type tierGlobals struct {
	nodes map[string]*model.NodeInfo
	host  []netip.Addr
}

// notePassInputs marks every column stale when the nodes or this node's
// addresses changed since the last pass.
func (c *Compiler) notePassInputs() {
	st := &c.tiers
	if maps.Equal(st.globals.nodes, c.cl.Nodes) && slices.Equal(st.globals.host, c.host) {
		return
	}
	st.globals = tierGlobals{nodes: maps.Clone(c.cl.Nodes), host: slices.Clone(c.host)}
	for _, col := range st.columns {
		col.stale = true
	}
}

// ownEntries are NetworkPolicy's entries of the rule sets tier sets stand
// on, by rule set and direction, then by peer, each list in order.
func (c *Compiler) ownEntries(sets map[string]*tierSet) map[[2]uint32]map[Identity][]Entry {
	out := map[[2]uint32]map[Identity][]Entry{}
	for _, ts := range sets {
		out[[2]uint32{ts.npRS, uint32(Ingress)}] = map[Identity][]Entry{}
		out[[2]uint32{ts.npRS, uint32(Egress)}] = map[Identity][]Entry{}
	}
	for e := range c.t.Entries {
		if byPeer, ok := out[[2]uint32{e.RuleSet, uint32(e.Dir)}]; ok {
			byPeer[e.Peer] = append(byPeer[e.Peer], e)
		}
	}
	for _, byPeer := range out {
		for _, l := range byPeer {
			slices.SortFunc(l, compareEntries)
		}
	}
	return out
}

func compareEntries(a, b Entry) int {
	return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Port, b.Port), cmp.Compare(a.PortBits, b.PortBits))
}

// memberPorts are the named ports of a class's pods, in order, each once
// (what an egress rule's named port reads of the peer).
func (c *Compiler) memberPorts(k *class) []model.NamedPort {
	if k == nil {
		return nil
	}
	var out []model.NamedPort
	for id := range k.members {
		if ps := c.pods[id]; ps != nil {
			out = append(out, ps.pod.Ports...)
		}
	}
	return sortedPorts(out)
}

func sortedPorts(ps []model.NamedPort) []model.NamedPort {
	out := slices.SortedFunc(slices.Values(ps), func(a, b model.NamedPort) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Proto, b.Proto))
	})
	return slices.Compact(out)
}

// peerInputsOf are peer pv's inputs to a function of direction d, whose
// NetworkPolicy entries for pv are own; memberPorts is per pass.
func (c *Compiler) peerInputsOf(pv peerView, d Direction, own []Entry, ports map[Identity][]model.NamedPort) peerInputs {
	in := peerInputs{own: own}
	switch {
	case pv.host:
		in.key = "host"
	case pv.k == nil:
		in.key = "world"
	default:
		in.key = pv.k.key
		if pv.k.members != nil {
			in.nsLabels = c.cl.nsLabels(pv.k.ns)
		}
	}
	if d == Egress {
		p, ok := ports[pv.id]
		if !ok {
			p = c.memberPorts(pv.k)
			ports[pv.id] = p
		}
		in.ports = p
	}
	return in
}

// computeColumns brings the functions of tier set ts in direction d up
// to date, and writes their entries where any changed. own are
// NetworkPolicy's entries of ts's rule set in d, by peer; ports the
// pass's memberPorts.
func (c *Compiler) computeColumns(ts *tierSet, d Direction, own map[Identity][]Entry, peers map[Identity]peerView,
	ports map[Identity][]model.NamedPort) {
	st := &c.tiers
	key := columnKey{ts.id, d}
	in := setInputs{policies: ts.policies, npIsolated: ts.npIsolated[dirIndex(d)], anyOwn: own[AnyPeer]}
	if d == Ingress {
		in.ports = sortedPorts(ts.pod.Ports)
	}
	col := st.columns[key]
	if col == nil {
		col = &tierColumns{stale: true, peers: map[Identity]*tierColumn{}}
		st.columns[key] = col
	}
	switch edited, ok := editedPolicies(&col.in, &in); {
	case col.stale || !ok:
		// Every function computes again; the entries written stay until
		// they are written again (only what differs is noted).
		col.in, col.stale, col.any.f = in, false, nil
		for _, pc := range col.peers {
			pc.peer = peerInputs{key: "\x00stale"}
		}
	case len(edited) > 0:
		// The same policies, some edited: a peer's function changes only
		// if an edited policy's rule, before or after, names it (its
		// verdicts and conflicts come from the rules naming it:
		// function). Any peer's is computed again: it changes only with
		// a rule for every peer, which names every peer.
		col.in, col.any.f = in, nil
		for id, pc := range col.peers {
			if pv, ok := peers[id]; !ok || c.namesPeer(edited, pv) {
				pc.peer = peerInputs{key: "\x00stale"}
			}
		}
	}
	rules := ts.rules(d)
	if len(rules) == 0 {
		// NetworkPolicy's alone: its entries, as they are.
		entries := map[Entry]bool{}
		if in.npIsolated {
			for _, l := range own {
				for _, e := range l {
					e.RuleSet = ts.id
					entries[e] = true
				}
			}
		}
		for id, pc := range col.peers {
			c.writeEntries(&pc.entries, nil)
			delete(col.peers, id)
		}
		col.any.f = nil
		c.writeEntries(&col.any.entries, entries)
		return
	}
	if col.any.f == nil {
		// Any peer's function reads only the rules for every peer, and
		// NetworkPolicy's entries for any peer: when it changes, every
		// peer is computed again too (namesPeer).
		col.any.f, col.any.conflicts = c.tierFunction(ts, d, rules, own, nobody)
		c.writeEntries(&col.any.entries, emitted(ts.id, d, AnyPeer, col.any.f))
	}
	for id, pv := range peers {
		if d == Ingress && pv.host {
			continue // this node's traffic to its pods is always allowed
		}
		pin := c.peerInputsOf(pv, d, own[id], ports)
		pc := col.peers[id]
		if pc != nil && pc.peer.equal(&pin) {
			continue
		}
		if pc == nil {
			pc = &tierColumn{}
			col.peers[id] = pc
		}
		pc.peer, pc.f, pc.conflicts = pin, nil, nil
		if slices.ContainsFunc(rules, func(r TierRule) bool { return !r.Rule.Everyone && c.matchesPeer(r.Rule, pv) }) || len(pin.own) > 0 {
			pc.f, pc.conflicts = c.tierFunction(ts, d, rules, own, pv)
		}
		c.writePeer(ts.id, d, id, pc, col.any.f)
	}
	for id, pc := range col.peers {
		if pv, ok := peers[id]; !ok || d == Ingress && pv.host {
			c.writeEntries(&pc.entries, nil)
			delete(col.peers, id)
		}
	}
}

// editedPolicies says whether b holds what a holds but for some
// policies edited (the same names in the same order), and which: a's and
// b's versions of each. ok is false when anything else differs.
func editedPolicies(a, b *setInputs) (edited []*model.ClusterPolicy, ok bool) {
	if a.npIsolated != b.npIsolated || len(a.policies) != len(b.policies) || !slices.Equal(a.ports, b.ports) ||
		!slices.Equal(a.anyOwn, b.anyOwn) {
		return nil, false
	}
	for i, p := range a.policies {
		q := b.policies[i]
		if p == q {
			continue
		}
		if p.Name != q.Name || p.Tier != q.Tier || p.Priority != q.Priority {
			return nil, false // evaluated in another order
		}
		edited = append(edited, p, q)
	}
	return edited, true
}

// namesPeer says whether a rule of the policies names peer pv, or names
// every peer.
func (c *Compiler) namesPeer(policies []*model.ClusterPolicy, pv peerView) bool {
	for _, cp := range policies {
		for _, rs := range [][]model.ClusterRule{cp.Ingress, cp.Egress} {
			for i := range rs {
				if c.matchesPeer(&rs[i], pv) {
					return true
				}
			}
		}
	}
	return false
}

// writePeer writes peer id's entries of tier set rs in direction d: its
// function's where it differs from any peer's (anyF), none otherwise.
func (c *Compiler) writePeer(rs uint32, d Direction, id Identity, pc *tierColumn, anyF *portFunc) {
	var want map[Entry]bool
	if pc.f != nil && !pc.f.equal(anyF) {
		want = emitted(rs, d, id, pc.f)
	}
	c.writeEntries(&pc.entries, want)
}

func emitted(rs uint32, d Direction, peer Identity, f *portFunc) map[Entry]bool {
	out := map[Entry]bool{}
	emit(out, rs, d, peer, f)
	return out
}

// tierFunction is c.function for peer pv, with the conflicts it found.
func (c *Compiler) tierFunction(ts *tierSet, d Direction, rules []TierRule, own map[Identity][]Entry, pv peerView) (*portFunc, []TierConflict) {
	seen := map[TierConflict]struct{}{}
	c.tiers.conflictsSeen = seen
	defer func() { c.tiers.conflictsSeen = nil }()
	np := own[AnyPeer]
	if pv.id != AnyPeer {
		np = append(slices.Clone(own[pv.id]), np...)
	}
	f := c.function(ts, d, rules, np, pv)
	return f, slices.Collect(maps.Keys(seen))
}

// writeEntries makes want a column's entries (have), noting in the
// tables what differs. Columns write disjoint entries: each its tier
// set's, direction's and peer's.
func (c *Compiler) writeEntries(have *map[Entry]bool, want map[Entry]bool) {
	for e, v := range want {
		if old, ok := (*have)[e]; !ok || old != v {
			c.t.Verdicts[e] = v
			c.changed.entry(e)
		}
	}
	for e := range *have {
		if _, ok := want[e]; !ok {
			delete(c.t.Verdicts, e)
			c.changed.entry(e)
		}
	}
	*have = want
}

// dropColumns takes out the entries of the tier sets' directions not
// computed this pass (live holds those that were).
func (c *Compiler) dropColumns(live map[columnKey]bool) {
	for key, col := range c.tiers.columns {
		if !live[key] {
			c.clearColumns(col)
			delete(c.tiers.columns, key)
		}
	}
}

// clearColumns takes out every entry col's columns wrote.
func (c *Compiler) clearColumns(col *tierColumns) {
	c.writeEntries(&col.any.entries, nil)
	for _, pc := range col.peers {
		c.writeEntries(&pc.entries, nil)
	}
}

// passConflicts are the conflicts of every live function, in order.
func (c *Compiler) passConflicts() []TierConflict {
	seen := map[TierConflict]struct{}{}
	for _, col := range c.tiers.columns {
		for _, tc := range col.any.conflicts {
			seen[tc] = struct{}{}
		}
		for _, pc := range col.peers {
			for _, tc := range pc.conflicts {
				seen[tc] = struct{}{}
			}
		}
	}
	return slices.SortedFunc(maps.Keys(seen), func(a, b TierConflict) int {
		return cmp.Or(cmp.Compare(a.First, b.First), cmp.Compare(a.Second, b.Second))
	})
}

// subjectOf is whether each policy selects a pod, as last found: a
// policy's answer holds while the pod, its namespace's labels and the
// policy are the objects they were.
type subjectOf struct {
	pod      *model.Pod
	nsLabels map[string]string
	policies []*model.ClusterPolicy // in evaluation order
	selects  []bool
}

// selecting are the policies (of cps, in evaluation order) that select
// pod p, matching again only those that changed since the last pass;
// seen notes p.
func (c *Compiler) selecting(cps []*model.ClusterPolicy, p *model.Pod, seen map[model.PodID]bool) []*model.ClusterPolicy {
	st := &c.tiers
	if st.subjects == nil {
		st.subjects = map[model.PodID]*subjectOf{}
	}
	seen[p.ID] = true
	nsl := c.cl.nsLabels(p.ID.Namespace)
	was := st.subjects[p.ID]
	if was == nil || was.pod != p || !maps.Equal(was.nsLabels, nsl) || len(was.policies) != len(cps) {
		was = &subjectOf{pod: p, nsLabels: nsl, policies: make([]*model.ClusterPolicy, len(cps)), selects: make([]bool, len(cps))}
		st.subjects[p.ID] = was
	}
	var out []*model.ClusterPolicy
	for i, cp := range cps {
		if was.policies[i] != cp {
			was.policies[i], was.selects[i] = cp, selectsPod(cp, p, nsl)
		}
		if was.selects[i] {
			out = append(out, cp)
		}
	}
	return out
}
