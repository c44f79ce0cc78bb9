package policy

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/netcube/netcube/pkg/model"
)

// Update brings the tables up to the cluster after the named pods,
// namespaces and policies changed in it (added, replaced or deleted),
// recompiling only what a change can touch:
//   - a pod of this node: its own entries from each policy of its
//     namespace selecting it, before or after (the policy's peers as
//     they were matched);
//   - a pod making a class (identity) or leaving one empty: in the
//     policies with a peer the class matches, the class's entries (the
//     policy whole if such a rule is on a named port);
//   - a pod whose named ports count: the policies with an egress rule on
//     a named port whose peers hold it (or every peer);
//   - a namespace's labels: the policies with a namespace selector
//     matching them, before or after;
//   - a policy: itself; if the set of ipBlock prefixes changes (which
//     may split or merge every class), the whole cluster (Compile).
//
// Before any Compile, Update does nothing.
func (c *Compiler) Update(pods []model.PodID, namespaces []string, policies []model.PolicyID) {
	if c.t == nil {
		return
	}
	pods, namespaces, policies = unique(pods), unique(namespaces), unique(policies)
	for _, id := range policies {
		if c.blocksChange(id) {
			c.Compile(c.cl, c.local, c.host)
			return
		}
	}
	u := &update{whole: map[model.PolicyID]struct{}{}, touched: map[model.PodID]struct{}{},
		rules: c.spareRules[:0], policies: c.sparePolicies[:0]}
	defer func() {
		// Kept without the pointers: no policy stays reachable from here.
		clear(u.rules)
		clear(u.policies)
		c.spareRules, c.sparePolicies = u.rules[:0], u.policies[:0]
	}()
	for _, id := range pods {
		c.podChanged(id, u)
	}
	for _, name := range namespaces {
		c.namespaceChanged(name, u.whole)
	}
	for _, id := range policies {
		u.whole[id] = struct{}{}
	}
	// In a stable order, as Compile (the endpoints of new pods numbered
	// alike).
	for _, id := range slices.SortedFunc(maps.Keys(u.whole), comparePolicyIDs) {
		c.recompile(id, u.touched)
	}
	// Classes first: a pod's own entries are then matched against the
	// peers as they are now.
	// (A policy's ops in the order they came.)
	// A policy recompiled whole has a new state: the ones noted here
	// for it are skipped (every policy recompiled is in u.whole).
	for _, ops := range u.classOps {
		for _, p := range u.policies[ops.lo:ops.hi] {
			if _, done := u.whole[p.ps.pol.ID]; !done {
				c.applyClassOp(p.ps, ops.op, u.rules[p.lo:p.hi])
			}
		}
	}
	for _, s := range u.pods {
		for _, ps := range s.policies {
			if _, done := u.whole[ps.pol.ID]; !done {
				c.reselect(ps, s.pod, u.touched)
			}
		}
	}
	for id := range u.touched {
		c.refreshEndpoint(id)
	}
	if c.warningsChanged {
		c.t.Warnings = c.warnings()
		c.warningsChanged = false
	}
	c.compileTiers()
}

// update is what one Update recompiles: policies whole, policies for a
// class made or emptied, and policies for a pod of this node; and the
// pods whose endpoint entries may change. (Lists by change, not maps by
// policy: a change names hundreds of policies, and a map of slices cost
// an allocation each.)
type update struct {
	whole    map[model.PolicyID]struct{}
	classOps []classOpFor
	pods     []podPolicies
	touched  map[model.PodID]struct{}
	// The class ops' policies, and their rules matching the class, one
	// after another (classOpFor and policyRules say where).
	policies []policyRules
	rules    []*model.PolicyRule
}

// podPolicies are the policies a change of this node's pod touches.
type podPolicies struct {
	pod      model.PodID
	policies []*policyState
}

// blocksChange says whether policy id's change makes or removes an
// ipBlock prefix; if not, it counts the policy's prefixes as they are now
// (recompile records them).
func (c *Compiler) blocksChange(id model.PolicyID) bool {
	delta := map[netip.Prefix]int{}
	if ps := c.policies[id]; ps != nil {
		for _, b := range ps.blocks {
			delta[b]--
		}
	}
	if pol := c.cl.Policies[id]; pol != nil {
		for _, b := range policyBlocks(pol) {
			delta[b]++
		}
	}
	for b, d := range delta {
		if n := c.blockRefs[b]; (n == 0) != (n+d == 0) {
			return true
		}
	}
	for b, d := range delta {
		if c.blockRefs[b] += d; c.blockRefs[b] == 0 {
			delete(c.blockRefs, b)
		}
	}
	return false
}

// TakeClusterPolicies takes the ClusterNetworkPolicies named as the
// cluster holds them now, and says whether their networks (or their nodes
// peers' addresses) make or remove a block prefix: then only Compile
// brings the classes up to date. Otherwise it counts their prefixes as
// they are now, and the next Update compiles the tier sets they touch.
func (c *Compiler) TakeClusterPolicies(names []string) (compileAll bool) {
	if c.t == nil {
		return true
	}
	delta := map[netip.Prefix]int{}
	now := map[string][]netip.Prefix{}
	for _, name := range unique(names) {
		for _, b := range c.tiers.blocks[name] {
			delta[b]--
		}
		if cp := c.cl.ClusterPolicies[name]; cp != nil {
			now[name] = clusterPolicyBlocks(c.cl, cp)
			for _, b := range now[name] {
				delta[b]++
			}
		} else {
			now[name] = nil
		}
	}
	for b, d := range delta {
		if n := c.blockRefs[b]; (n == 0) != (n+d == 0) {
			return true
		}
	}
	for b, d := range delta {
		if c.blockRefs[b] += d; c.blockRefs[b] == 0 {
			delete(c.blockRefs, b)
		}
	}
	for name, bs := range now {
		if bs == nil {
			delete(c.tiers.blocks, name)
		} else {
			c.tiers.blocks[name] = bs
		}
	}
	return false
}

// podChanged compiles pod id as the cluster holds it now, and names the
// policies and endpoints the change touches.
func (c *Compiler) podChanged(id model.PodID, u *update) {
	old := c.pods[id]
	p := c.cl.Pods[id]
	if old != nil && old.pod == p {
		return
	}
	var oldPod *model.Pod
	var oldClasses []*class
	wasLocal := false
	if old != nil {
		oldPod, oldClasses, wasLocal = old.pod, old.classes, old.local
	}
	// The new pod's classes are joined before the old ones are left, so
	// that a class both hold is not seen going and coming.
	var now *podState
	var born []*class
	if p != nil {
		now = &podState{pod: p, local: !p.HostNetwork && c.local(p)}
		if now.local {
			now.ruleSet = c.joinRuleSet(p) // before the old one is left: alike, it stays
		}
		if !p.HostNetwork {
			for _, a := range p.IPs {
				k, isNew := c.join(p, a)
				now.classes = append(now.classes, k)
				if isNew {
					born = append(born, k)
				}
			}
		}
	}
	var gone []*class
	for _, k := range oldClasses {
		if c.leave(id, k) {
			gone = append(gone, k)
		}
	}
	if oldPod != nil && !oldPod.HostNetwork {
		for _, a := range oldPod.IPs {
			if p == nil || p.HostNetwork || !slices.Contains(p.IPs, a) {
				c.dropPeer(id, a)
			}
		}
	}
	if wasLocal {
		c.leaveRuleSet(oldPod)
	}
	if now != nil {
		c.pods[id] = now
		for i, a := range p.IPs[:len(now.classes)] {
			c.setPeer(id, a, now.classes[i].id)
		}
	} else {
		delete(c.pods, id)
	}
	if wasLocal {
		unset(c.localByNS, id.Namespace, id)
	}
	if now != nil && now.local {
		set(c.localByNS, id.Namespace, id)
		c.endpointID(id)
	}
	u.touched[id] = struct{}{}

	// The policies of its namespace selecting it, before or after (this
	// node's pod): its own entries.
	if wasLocal || (now != nil && now.local) {
		var sets []map[string]string
		for _, pod := range []*model.Pod{oldPod, p} {
			if pod != nil && !pod.HostNetwork {
				sets = append(sets, pod.Labels)
			}
		}
		s := podPolicies{pod: id}
		c.selectors.subjectPolicies(id.Namespace, sets, func(ps *policyState) {
			s.policies = append(s.policies, ps)
		})
		u.pods = append(u.pods, s)
	}
	// The policies whose peers it changes: a class made or emptied (pod
	// classes match the policies of their namespace, or those with wider
	// peers); its named ports, for egress rules on named ports.
	for _, k := range gone {
		c.classChanged(u, k, false)
	}
	for _, k := range born {
		c.classChanged(u, k, true)
	}
	if oldPod == nil || p == nil || !slices.Equal(oldPod.Ports, p.Ports) || !sameClasses(oldClasses, now) {
		held := slices.Concat(oldClasses, classesOf(now))
		for pid := range c.egressNamed {
			if _, ok := u.whole[pid]; !ok && c.egressNamedTouches(c.policies[pid].pol, held) {
				u.whole[pid] = struct{}{}
			}
		}
	}
}

// classChanged notes class k made (born) or emptied for the policies
// with a peer matching it: pod classes match the policies of their
// namespace, or those with wider peers. Their entries for k alone are
// added or taken out (classOp), unless an egress rule on a named port
// matches it (the port is the peers' own, so whether it is found may
// change): then the policy is recompiled whole. An ingress named port is
// the selected pod's, found or not whatever the peers (addRulePeers).
func (c *Compiler) classChanged(u *update, k *class, born bool) {
	op := classOp{k, born}
	if slices.ContainsFunc(u.classOps, func(o classOpFor) bool { return o.op == op }) {
		return // noted already
	}
	ops := classOpFor{op: op, lo: len(u.policies)}
	defer func() {
		ops.hi = len(u.policies)
		u.classOps = append(u.classOps, ops)
	}()
	c.selectors.peerPolicies(k, c.cl.nsLabels(k.ns), func(ps *policyState) {
		pid, pol := ps.pol.ID, ps.pol
		if _, ok := u.whole[pid]; ok {
			return
		}
		n := len(u.rules)
		named := false
		for i := range pol.Ingress {
			if r := &pol.Ingress[i]; c.selectors.peersHold(ps, r, k) {
				u.rules = append(u.rules, r)
			}
		}
		for i := range pol.Egress {
			if r := &pol.Egress[i]; c.selectors.peersHold(ps, r, k) {
				u.rules = append(u.rules, r)
				named = named || hasNamedPort(r)
			}
		}
		switch {
		case named:
			u.rules = u.rules[:n]
			u.whole[pid] = struct{}{}
		case len(u.rules) > n:
			u.policies = append(u.policies, policyRules{ps, n, len(u.rules)})
		}
	})
}

// classOpFor is a class op and the policies it touches (the update's
// policies[lo:hi]), each with the rules whose peers match the class
// (classChanged judges them once: applyClassOp runs after the policies
// recompiled whole).
type classOpFor struct {
	op     classOp
	lo, hi int
}

// policyRules is a policy and its rules matching a class: the update's
// rules[lo:hi].
type policyRules struct {
	ps     *policyState
	lo, hi int
}

// classOp is a class made (born) or emptied, for one policy.
type classOp struct {
	k    *class
	born bool
}

// applyClassOp adds (born) or takes out the entries policy ps gives class
// k, for each rule set it selects, and keeps its rules' peers with k or
// without it; matching are ps's rules whose peers match k (classChanged's).
// No egress rule of ps matching k is on a named port (classChanged).
//
// A new identity runs this for every policy whose peers may match it
// (hundreds, at thousands of policies), so each rule is matched against
// k once, not once per rule set, and the entries go straight into or out
// of each rule set's selection: an emptied class's entries are made
// again from the rules that held it, not found by walking every entry of
// the selection.
func (c *Compiler) applyClassOp(ps *policyState, op classOp, matching []*model.PolicyRule) {
	pol := ps.pol
	// holds: the rules whose peers hold k now (born: those matching it;
	// emptied: those that held it). A class's match is fixed while it
	// lives: a namespace's labels or a policy's blocks changing recompile
	// the policy whole.
	var holds []*model.PolicyRule
	for i := range ps.peers {
		rp := &ps.peers[i]
		n := len(rp.peers)
		rp.peers = slices.DeleteFunc(rp.peers, func(x *class) bool { return x.id == op.k.id })
		held := len(rp.peers) < n
		if op.born {
			if held = slices.Contains(matching, rp.rule); held {
				rp.peers = append(rp.peers, op.k)
			}
		}
		if held {
			holds = append(holds, rp.rule)
		}
	}
	if len(holds) == 0 {
		return
	}
	only := []*class{op.k}
	for _, sel := range ps.bySet {
		// Two rules may give the same entry: the selection holds it,
		// and the table counts it, once.
		add := func(e Entry) {
			n := len(sel.entries)
			sel.entries[e] = struct{}{}
			if len(sel.entries) > n {
				c.ref(e)
			}
		}
		if !op.born {
			add = func(e Entry) {
				if _, ok := sel.entries[e]; ok {
					delete(sel.entries, e)
					c.unref(e)
				}
			}
		}
		for _, d := range [...]struct {
			dir      Direction
			isolates bool
			rules    []model.PolicyRule
		}{{Ingress, pol.IsolatesIngress, pol.Ingress}, {Egress, pol.IsolatesEgress, pol.Egress}} {
			if !d.isolates {
				continue
			}
			for i := range d.rules {
				if r := &d.rules[i]; slices.Contains(holds, r) {
					c.addRulePeers(add, only, pol, r, sel.ruleSet, d.dir, sel.self)
				}
			}
		}
	}
}

// egressNamedTouches says whether an egress rule of pol on a named port
// allows every peer or a peer matching one of held.
func (c *Compiler) egressNamedTouches(pol *model.Policy, held []*class) bool {
	for i := range pol.Egress {
		r := &pol.Egress[i]
		if !hasNamedPort(r) {
			continue
		}
		if len(r.Peers) == 0 {
			return true
		}
		for _, k := range held {
			if c.peersMatch(pol, r, k) {
				return true
			}
		}
	}
	return false
}

func classesOf(ps *podState) []*class {
	if ps == nil {
		return nil
	}
	return ps.classes
}

func sameClasses(old []*class, now *podState) bool {
	return slices.Equal(old, classesOf(now))
}

func selects(pol *model.Policy, p *model.Pod) bool {
	return p != nil && !p.HostNetwork && pol.Pods.Matches(labelSet(p.Labels))
}

func hasNamedPort(r *model.PolicyRule) bool {
	return slices.ContainsFunc(r.Ports, func(p model.PolicyPort) bool { return p.Name != "" })
}

// namespaceChanged names the policies whose namespace selectors matched
// the namespace's labels as compiled or match them now.
func (c *Compiler) namespaceChanged(name string, affected map[model.PolicyID]struct{}) {
	before, hadNS := c.nsLabels[name]
	now := c.cl.nsLabels(name)
	if _, has := c.cl.Namespaces[name]; has {
		c.nsLabels[name] = now
	} else {
		delete(c.nsLabels, name)
	}
	if hadNS && maps.Equal(before, now) {
		return
	}
	for pid := range c.widePeers {
		if pol := c.policies[pid].pol; nsSelectorMatches(pol, before) || nsSelectorMatches(pol, now) {
			affected[pid] = struct{}{}
		}
	}
}

// nsSelectorMatches says whether a namespace selector of pol matches
// labels.
func nsSelectorMatches(pol *model.Policy, l map[string]string) bool {
	for _, rules := range [][]model.PolicyRule{pol.Ingress, pol.Egress} {
		for _, r := range rules {
			for _, peer := range r.Peers {
				if peer.Namespaces != nil && peer.Namespaces.Matches(labelSet(l)) {
					return true
				}
			}
		}
	}
	return false
}

// policyBlocks are the prefixes of pol's ipBlocks (with repeats: counted
// as many times as named), and IPv4's whole range for a cidr that covers
// ::ffff:0:0/96 (mappedV4).
func policyBlocks(pol *model.Policy) []netip.Prefix {
	var out []netip.Prefix
	for _, rules := range [][]model.PolicyRule{pol.Ingress, pol.Egress} {
		for _, r := range rules {
			for _, p := range r.Peers {
				if p.Block == nil {
					continue
				}
				out = append(out, p.Block.CIDR)
				if coversMappedV4(p.Block.CIDR) {
					out = append(out, allV4)
				}
				out = append(out, p.Block.Except...)
			}
		}
	}
	return out
}

// An IPv4 address is keyed v4-mapped (::ffff:a.b.c.d) in the datapath's
// 16-byte prefix map, so an IPv6 block holding ::ffff:0:0/96 (::/0, say)
// would be the longest match of every IPv4 address outside the pods and
// the IPv4 blocks, and an IPv6 rule would admit IPv4 clients. A cidr that
// covers it brings IPv4's whole range as a block of its own: its class
// is outside every IPv6 block (an IPv4 address is in no IPv6 prefix), so
// IPv4 clients match it first and an IPv6 rule admits only IPv6, as
// written.
var (
	mappedV4 = netip.MustParsePrefix("::ffff:0:0/96")
	allV4    = netip.MustParsePrefix("0.0.0.0/0")
)

// coversMappedV4 says whether IPv6 prefix p holds ::ffff:0:0/96.
func coversMappedV4(p netip.Prefix) bool {
	return p.Addr().Is6() && p.Bits() <= mappedV4.Bits() && p.Contains(mappedV4.Addr())
}

// blocksFrom are the counted prefixes, sorted.
func blocksFrom(refs map[netip.Prefix]int) blockSet {
	return blockSet(slices.SortedFunc(maps.Keys(refs), comparePrefix))
}

func unique[T comparable](s []T) []T {
	seen := make(map[T]struct{}, len(s))
	out := s[:0:0]
	for _, v := range s {
		if _, ok := seen[v]; !ok {
			seen[v] = struct{}{}
			out = append(out, v)
		}
	}
	return out
}
