package policy

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"github.com/netcube/netcube/pkg/model"
)

// Compiler turns the cluster into one node's tables and keeps them
// current change by change. Compile builds them whole; Update then takes
// the pods, namespaces and policies that changed and recompiles only the
// policies a change can touch (Update says which), found through their
// distinct selectors (selectorIndex) rather than by asking every policy,
// so a change costs what it touches, with 10 policies as with 10,000.
// Each policy's entries are kept apart and the tables' entries counted
// by how many policies hold them: a policy recompiled takes out what it
// gave and puts in what it gives now. Changes lists the keys of the
// tables that changed since it was last called, for the map writes.
//
// Identities and endpoint numbers stay stable from one compilation to
// the next. The compiler reads the Cluster it was given (not safe for
// concurrent use: its owner mutates the cluster and calls Update under
// one lock); a changed object must be replaced in the cluster, not
// mutated in place, since a change is known by the object's pointer.
type Compiler struct {
	ids         *Identities
	endpoints   map[model.PodID]uint32
	ruleSets    map[string]*ruleSet // by ruleSetKey
	nextEP      uint32
	nextRuleSet uint32

	// What Compile was given, which Update goes on with.
	cl    *Cluster
	local func(*model.Pod) bool
	host  []netip.Addr

	blocks    blockSet
	blockRefs map[netip.Prefix]int // each ipBlock prefix, by the peers naming it
	classes   map[string]*class    // every identity's class, by key
	byNS      map[string]map[*class]struct{}
	pods      map[model.PodID]*podState
	localByNS map[string]map[model.PodID]struct{} // this node's pods
	addrOwner map[netip.Addr]model.PodID          // the pod whose address Peers and Endpoints hold
	policies  map[model.PolicyID]*policyState
	// The policies by what a change must look at: their distinct
	// selectors (whom they apply to, and their peers); a peer in other
	// namespaces or an ipBlock (for a namespace's labels changed); an
	// egress rule on a named port (which reads the peers' pods).
	selectors   *selectorIndex
	widePeers   map[model.PolicyID]struct{}
	egressNamed map[model.PolicyID]struct{}
	nsLabels    map[string]map[string]string // each namespace's labels as compiled
	eps         map[model.PodID]*endpointState
	// sharedRefs counts, for an entry more than one policy's selection
	// holds, the holders beyond the first (the tables hold every entry
	// once: most entries have one holder, so most have no count here).
	sharedRefs map[Entry]int

	tiers tierState // the ClusterNetworkPolicy tier sets (tiers.go)

	t               *Tables
	changed         Changes
	spare           Changes // the maps of the Changes returned last, reused
	warningsChanged bool
	// The lists an Update's class ops fill, kept for the next: a new
	// identity fills them with hundreds of policies and their rules, and
	// what each change allocates decides how often the collector runs
	// (and slows the changes it runs beside).
	spareRules    []*model.PolicyRule
	sparePolicies []policyRules
}

// podState is a pod as compiled: the object, and its addresses' classes;
// this node's pods, the number of their rule set.
type podState struct {
	pod     *model.Pod
	classes []*class // one per address; none for a host-network pod
	local   bool
	ruleSet uint32
}

// policyState is a policy as compiled: its rules' peers, and what it
// gives the rule set of each pod of this node it selects (compiled once
// per rule set: its pods are alike).
type policyState struct {
	pol    *model.Policy
	peers  rulePeers
	byPod  map[model.PodID]*selection
	bySet  selections
	blocks []netip.Prefix // of its peers' ipBlocks
	// ruleSels are its rules' peer selectors (selectorIndex.add), for
	// the rules with peers.
	ruleSels []ruleSels
}

// selections are a policy's selections, one per rule set. A policy
// selects a few rule sets of this node: a list, which a new identity
// (applyClassOp, for each of hundreds of policies) walks without a map
// iterator's start.
type selections []*selection

// of is rule set rs's selection, or nil.
func (ss selections) of(rs uint32) *selection {
	for _, sel := range ss {
		if sel.ruleSet == rs {
			return sel
		}
	}
	return nil
}

// remove takes sel out, if it is there.
func (ss *selections) remove(sel *selection) {
	if i := slices.Index(*ss, sel); i >= 0 {
		*ss = slices.Delete(*ss, i, i+1)
	}
}

// rulePeers are the classes each rule of a policy allows, matched once.
// A policy has a few rules: a list, which a new identity (applyClassOp,
// for each of hundreds of policies) walks without a map iterator's start.
type rulePeers []rulePeer

type rulePeer struct {
	rule  *model.PolicyRule
	peers []*class
}

func (rp rulePeers) of(r *model.PolicyRule) ([]*class, bool) {
	for _, x := range rp {
		if x.rule == r {
			return x.peers, true
		}
	}
	return nil, false
}

func (rp *rulePeers) set(r *model.PolicyRule, peers []*class) {
	for i := range *rp {
		if (*rp)[i].rule == r {
			(*rp)[i].peers = peers
			return
		}
	}
	*rp = append(*rp, rulePeer{r, peers})
}

// selection is what a policy gives one rule set: its entries, and
// warnings; held by the set's pods the policy selects.
type selection struct {
	ruleSet  uint32
	self     *model.Pod // one of its pods (alike: any gives the same entries)
	pods     int
	entries  map[Entry]struct{}
	warnings []string
}

// endpointState counts the policies that select a pod of this node, and
// isolate it each way; addrs are its addresses the Endpoints hold.
type endpointState struct {
	id                         uint32
	selectors, ingress, egress int
	addrs                      []netip.Addr
}

// NewCompiler returns a compiler with no identities handed out yet.
func NewCompiler() *Compiler {
	return &Compiler{ids: NewIdentities(), endpoints: map[model.PodID]uint32{}, ruleSets: map[string]*ruleSet{}, nextEP: 1,
		nextRuleSet: firstRuleSet}
}

// NumberAbove makes every endpoint, rule set and identity number the
// compiler hands out from now on larger than those given: an earlier
// agent's, read from the pinned maps before the first compilation. A
// number then never means two things in the maps at once: the first
// pass writes the new numbers' entries before it moves the endpoints to
// them, and the sweep deletes the old ones after.
func (c *Compiler) NumberAbove(endpoint, ruleSet uint32, identity Identity) {
	c.nextEP = max(c.nextEP, endpoint+1)
	c.nextRuleSet = max(c.nextRuleSet, ruleSet+1)
	c.ids.next = max(c.ids.next, identity+1)
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

// Tables are the tables as last compiled (nil before Compile). Update
// changes them in place.
func (c *Compiler) Tables() *Tables { return c.t }

// Changes returns the keys of the tables that changed since the last
// call (everything, after the first Compile), and forgets them. What it
// returns is the caller's until it calls again: the call after reuses
// its maps (a change's thousands of keys would otherwise grow new ones
// each time, and their garbage is what makes the collector run).
func (c *Compiler) Changes() Changes {
	ch := c.changed
	c.changed, c.spare = c.spare, Changes{}
	c.changed.clear()
	if ch.Len() <= maxSpareKeys {
		c.spare = ch
	}
	return ch
}

// maxSpareKeys bounds the maps Changes keeps for reuse: those of a whole
// compilation are dropped (clearing a map costs its capacity).
const maxSpareKeys = 1 << 14

// Requeue gives back changes not written (a failed write), so that the
// next Changes returns them too.
func (c *Compiler) Requeue(ch Changes) { c.changed.merge(ch) }

// Compile computes the tables of the node whose pods local says, and
// whose own addresses are hostAddrs, from the whole cluster: new Tables,
// with Changes holding what differs from the last ones.
func (c *Compiler) Compile(cl *Cluster, local func(*model.Pod) bool, hostAddrs []netip.Addr) *Tables {
	c.cl, c.local, c.host = cl, local, hostAddrs
	old := c.t
	c.blockRefs = map[netip.Prefix]int{}
	c.classes = map[string]*class{}
	c.byNS = map[string]map[*class]struct{}{}
	c.pods = map[model.PodID]*podState{}
	c.localByNS = map[string]map[model.PodID]struct{}{}
	c.addrOwner = map[netip.Addr]model.PodID{}
	c.policies = map[model.PolicyID]*policyState{}
	c.widePeers = map[model.PolicyID]struct{}{}
	c.egressNamed = map[model.PolicyID]struct{}{}
	c.selectors = newSelectorIndex()
	c.nsLabels = map[string]map[string]string{}
	c.eps = map[model.PodID]*endpointState{}
	c.sharedRefs = map[Entry]int{}
	c.t = &Tables{Peers: map[netip.Prefix]Identity{}, Endpoints: map[netip.Addr]Endpoint{}, Entries: map[Entry]struct{}{}}
	pending := c.changed
	c.changed = Changes{}

	policies := cl.sortedPolicies()
	for _, pol := range policies {
		for _, b := range policyBlocks(pol) {
			c.blockRefs[b]++
		}
	}
	// A ClusterNetworkPolicy's networks are blocks too
	// (TakeClusterPolicies counts them as the policies change).
	c.tiers.blocks = map[string][]netip.Prefix{}
	for name, cp := range cl.ClusterPolicies {
		c.tiers.blocks[name] = clusterPolicyBlocks(cl, cp)
		for _, b := range c.tiers.blocks[name] {
			c.blockRefs[b]++
		}
	}
	c.blocks = blocksFrom(c.blockRefs)
	// Pods in a stable order: two compilers of one cluster number it
	// alike (a restarted agent numbers above its predecessor's instead:
	// NumberAbove). A rule set keeps its number while some pod still
	// holds it.
	for _, rs := range c.ruleSets {
		rs.members = 0
	}
	for _, p := range cl.sortedPods() {
		c.addPod(p)
	}
	maps.DeleteFunc(c.ruleSets, func(_ string, rs *ruleSet) bool { return rs.members == 0 })
	for _, b := range c.blocks {
		sig := c.blocks.signatureOf(b)
		key := "world\x00" + sigKey(sig)
		k := &class{id: c.ids.of(key), key: key, sig: sig}
		c.classes[key] = k
		c.t.Peers[b] = k.id
	}
	for _, a := range hostAddrs {
		c.t.Peers[netip.PrefixFrom(a, a.BitLen())] = Host
	}
	for name, ns := range cl.Namespaces {
		c.nsLabels[name] = ns.Labels
	}
	touched := map[model.PodID]struct{}{}
	for _, pol := range policies {
		c.recompile(pol.ID, touched)
	}
	for id := range touched {
		c.refreshEndpoint(id)
	}
	c.t.Warnings = c.warnings()
	c.warningsChanged = false
	if old != nil {
		// The tier sets' entries go on from the last ones: compileTiers
		// computes again only what changed (diffTables finds it).
		c.t.Verdicts = maps.Clone(old.Verdicts)
	}
	c.compileTiers()

	c.changed = diffTables(old, c.t)
	c.changed.merge(pending)
	return c.t
}

// warnings are every policy's, in the policies' order, each once.
func (c *Compiler) warnings() []Warning {
	var out []Warning
	for id, ps := range c.policies {
		msgs := map[string]bool{}
		for _, sel := range ps.byPod {
			for _, msg := range sel.warnings {
				msgs[msg] = true
			}
		}
		for msg := range msgs {
			out = append(out, Warning{id, msg})
		}
	}
	slices.SortFunc(out, func(a, b Warning) int {
		if a.Policy != b.Policy {
			return comparePolicyIDs(a.Policy, b.Policy)
		}
		return cmp.Compare(a.Msg, b.Msg)
	})
	return out
}

// index and unindex file a policy by what a change must look at.
func (c *Compiler) index(ps *policyState) {
	id := ps.pol.ID
	c.selectors.add(ps, 1)
	if hasWidePeer(ps.pol) {
		c.widePeers[id] = struct{}{}
	}
	if ps.pol.IsolatesEgress && slices.ContainsFunc(ps.pol.Egress, func(r model.PolicyRule) bool { return hasNamedPort(&r) }) {
		c.egressNamed[id] = struct{}{}
	}
}

func (c *Compiler) unindex(ps *policyState) {
	id := ps.pol.ID
	c.selectors.add(ps, -1)
	delete(c.widePeers, id)
	delete(c.egressNamed, id)
	delete(c.policies, id)
}

// hasWidePeer says whether a peer of pol may match outside its
// namespace: a namespace selector, or an ipBlock.
func hasWidePeer(pol *model.Policy) bool {
	for _, rules := range [][]model.PolicyRule{pol.Ingress, pol.Egress} {
		for _, r := range rules {
			for _, p := range r.Peers {
				if p.Namespaces != nil || p.Block != nil {
					return true
				}
			}
		}
	}
	return false
}

// addPod puts a pod the compiler does not hold yet into its classes, the
// identity cache and (this node's) the endpoint numbers.
func (c *Compiler) addPod(p *model.Pod) {
	ps := &podState{pod: p, local: !p.HostNetwork && c.local(p)}
	c.pods[p.ID] = ps
	if p.HostNetwork {
		return // its addresses are its node's
	}
	for _, a := range p.IPs {
		k, _ := c.join(p, a)
		ps.classes = append(ps.classes, k)
		c.setPeer(p.ID, a, k.id)
	}
	if ps.local {
		set(c.localByNS, p.ID.Namespace, p.ID)
		c.endpointID(p.ID)
		ps.ruleSet = c.joinRuleSet(p)
	}
}

// join makes a pod address a member of its class, made if new (born).
func (c *Compiler) join(p *model.Pod, a netip.Addr) (k *class, born bool) {
	sig := c.blocks.signature(a)
	key := "pod\x00" + p.ID.Namespace + "\x00" + labelsKey(p.Labels) + "\x00" + sigKey(sig)
	k = c.classes[key]
	if k == nil {
		k = &class{id: c.ids.of(key), key: key, ns: p.ID.Namespace, labels: p.Labels, sig: sig, members: map[model.PodID]int{}}
		c.classes[key] = k
		set(c.byNS, k.ns, k)
		born = true
	}
	k.members[p.ID]++
	return k, born
}

// leave takes one of a pod's addresses out of class k; gone: it was the
// last.
func (c *Compiler) leave(id model.PodID, k *class) (gone bool) {
	if k.members[id]--; k.members[id] <= 0 {
		delete(k.members, id)
	}
	if len(k.members) > 0 {
		return false
	}
	delete(c.classes, k.key)
	unset(c.byNS, k.ns, k)
	return true
}

func (c *Compiler) setPeer(id model.PodID, a netip.Addr, ident Identity) {
	p := netip.PrefixFrom(a, a.BitLen())
	c.addrOwner[a] = id
	if c.t.Peers[p] != ident {
		c.t.Peers[p] = ident
		c.changed.peer(p)
	}
}

// dropPeer takes a pod's address out of the identity cache, unless
// another pod holds it now (an address given again).
func (c *Compiler) dropPeer(id model.PodID, a netip.Addr) {
	if owner, ok := c.addrOwner[a]; ok && owner != id {
		return
	}
	delete(c.addrOwner, a)
	p := netip.PrefixFrom(a, a.BitLen())
	if _, ok := c.t.Peers[p]; ok {
		delete(c.t.Peers, p)
		c.changed.peer(p)
	}
}

// refreshEndpoint writes a pod's endpoint entries as its policies now
// say: one per address while some policy selects it.
func (c *Compiler) refreshEndpoint(id model.PodID) {
	es := c.eps[id]
	var had []netip.Addr
	if es != nil {
		had = es.addrs
		es.addrs = nil
		if es.selectors == 0 {
			delete(c.eps, id)
		} else if ps := c.pods[id]; ps != nil && ps.local {
			es.addrs = slices.Clone(ps.pod.IPs)
		}
	}
	for _, a := range had {
		c.refreshAddr(a)
	}
	if es != nil {
		for _, a := range es.addrs {
			c.refreshAddr(a)
		}
	}
}

// refreshAddr writes the endpoint entry of address a as the pod holding
// it says (its policies may have gone with it, or it may have been given
// to another pod).
func (c *Compiler) refreshAddr(a netip.Addr) {
	var ep Endpoint
	want := false
	if owner, ok := c.addrOwner[a]; ok {
		if es, ps := c.eps[owner], c.pods[owner]; es != nil && ps != nil && slices.Contains(es.addrs, a) {
			ep = Endpoint{ID: es.id, RuleSet: ps.ruleSet, IsolatedIngress: es.ingress > 0, IsolatedEgress: es.egress > 0}
			want = true
		}
	}
	old, ok := c.t.Endpoints[a]
	switch {
	case want && (!ok || old != ep):
		c.t.Endpoints[a] = ep
		c.changed.endpoint(a)
	case !want && ok:
		delete(c.t.Endpoints, a)
		c.changed.endpoint(a)
	}
}

// ref and unref count a policy's entry in and out of the tables. A
// class change refs or unrefs hundreds of entries of a table of tens of
// thousands: the first holder is the insertion itself (one map write,
// told new by the table's growing), and only entries with more holders
// are counted in sharedRefs.
func (c *Compiler) ref(e Entry) {
	n := len(c.t.Entries)
	c.t.Entries[e] = struct{}{}
	if len(c.t.Entries) > n {
		c.changed.entry(e)
		return
	}
	c.sharedRefs[e]++
}

func (c *Compiler) unref(e Entry) {
	switch n := c.sharedRefs[e]; n {
	case 0:
		delete(c.t.Entries, e)
		c.changed.entry(e)
	case 1:
		delete(c.sharedRefs, e)
	default:
		c.sharedRefs[e] = n - 1
	}
}

// set and unset keep a map of sets.
func set[K, V comparable](m map[K]map[V]struct{}, k K, v V) {
	s := m[k]
	if s == nil {
		s = map[V]struct{}{}
		m[k] = s
	}
	s[v] = struct{}{}
}

func unset[K, V comparable](m map[K]map[V]struct{}, k K, v V) {
	if s := m[k]; s != nil {
		delete(s, v)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}
