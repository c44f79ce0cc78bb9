package policy

// ClusterNetworkPolicy's tiers, compiled into the same entries as
// NetworkPolicy. For each connection the API evaluates the Admin tier's
// rules by ascending priority (the first match decides; Pass goes on to
// NetworkPolicy), then NetworkPolicy as before (a pod it isolates gets
// its verdict, final), then the Baseline tier's rules, and allows what
// none decided.
//
// The datapath knows none of this. A pod some ClusterNetworkPolicy
// selects gets a rule set of its own (a tier set: its NetworkPolicy rule
// set and the ClusterNetworkPolicies selecting it), and that set's
// entries carry the final verdict, allow or deny: for each direction with
// cluster rules, a complete function of (peer identity, protocol, port)
// written as the datapath looks entries up (the peer's entries first, then
// any peer's; a port, then its ranges, then every protocol), so a lookup
// always ends on an entry and costs what a NetworkPolicy lookup costs,
// whatever the number of policies. A peer gets entries of its own only
// where its verdicts differ from any peer's: when some rule names it or
// its NetworkPolicy entries do. A pod no ClusterNetworkPolicy selects
// keeps its NetworkPolicy rule set and pays nothing more.
//
// After every Compile and Update while some ClusterNetworkPolicy exists,
// the tier sets are found again, and each set's function for a peer is
// computed again only where what it reads changed (tiers_memo.go): a
// ClusterNetworkPolicy edited costs the sets it selects, a pod relabelled
// the columns of its classes. The maps get only what changed.

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/netcube/netcube/pkg/model"
)

// tierSet is one tier set: a NetworkPolicy rule set's pods as the
// ClusterNetworkPolicies selecting them see them.
type tierSet struct {
	id       uint32
	npRS     uint32
	pod      *model.Pod             // a member: its namespace, labels and named ports are every member's
	policies []*model.ClusterPolicy // in evaluation order (tierOrder)
	// By direction (dirIndex): isolated, looked up (cluster rules there,
	// or NetworkPolicy isolates); npIsolated, NetworkPolicy isolates.
	isolated, npIsolated [2]bool
}

// TierRule is one rule of a tier set, in evaluation order.
type TierRule struct {
	Policy *model.ClusterPolicy
	Index  int // in its direction's rules
	Rule   *model.ClusterRule
}

// Ref names the rule's policy as verdict events do.
func (r TierRule) Ref() string { return model.ClusterPolicyRef(r.Policy.Tier, r.Policy.Name) }

func dirIndex(d Direction) int {
	if d == Egress {
		return 1
	}
	return 0
}

// tierOrder orders ClusterNetworkPolicies as they are evaluated: Admin
// before Baseline, each by ascending priority. The API leaves the order
// of two policies of one tier and priority to the implementation: netcube
// takes them by name, and says so (sameTierConflicts).
func tierOrder(a, b *model.ClusterPolicy) int {
	if a.Tier != b.Tier {
		if a.Tier == model.AdminTier {
			return -1
		}
		return 1
	}
	if a.Priority != b.Priority {
		return cmp.Compare(a.Priority, b.Priority)
	}
	return cmp.Compare(a.Name, b.Name)
}

// selectsPod says whether cp's subject holds pod p (of namespace labels
// nsl).
func selectsPod(cp *model.ClusterPolicy, p *model.Pod, nsl map[string]string) bool {
	return !p.HostNetwork && cp.Namespaces.Matches(labelSet(nsl)) && (cp.Pods == nil || cp.Pods.Matches(labelSet(p.Labels)))
}

// rules are ts's rules of direction d in evaluation order.
func (ts *tierSet) rules(d Direction) []TierRule {
	var out []TierRule
	for _, cp := range ts.policies {
		rs := cp.Ingress
		if d == Egress {
			rs = cp.Egress
		}
		for i := range rs {
			out = append(out, TierRule{Policy: cp, Index: i, Rule: &rs[i]})
		}
	}
	return out
}

// peerView is a peer identity as the cluster rules see it: a class (a
// pod class or an IP block region), World (k nil) or this node (host).
type peerView struct {
	id   Identity
	k    *class
	host bool
}

// nobody matches no rule's peers: what any peer gets where no rule names
// it (AnyPeer's entries).
var nobody = peerView{id: AnyPeer}

// matchesPeer says whether rule r names peer pv.
func (c *Compiler) matchesPeer(r *model.ClusterRule, pv peerView) bool {
	if r.Everyone {
		return true
	}
	for _, p := range r.Peers {
		switch {
		case p.Block != nil:
			if c.inNetwork(pv, p.Block.CIDR) {
				return true
			}
		case pv.k != nil && pv.k.members != nil: // a pod class
			if p.Namespaces.Matches(labelSet(c.cl.nsLabels(pv.k.ns))) && p.Pods.Matches(labelSet(pv.k.labels)) {
				return true
			}
		}
	}
	for _, sel := range r.Nodes {
		for _, a := range c.cl.nodeAddrs(sel) {
			a = a.Unmap()
			if pv.host && slices.Contains(c.host, a) || pv.k != nil && pv.k.members == nil && slices.Contains(pv.k.sig, netip.PrefixFrom(a, a.BitLen())) {
				return true
			}
		}
	}
	return false
}

// inNetwork says whether the peer's addresses are in cidr. This node's
// own addresses (one identity) are when any of them is.
func (c *Compiler) inNetwork(pv peerView, cidr netip.Prefix) bool {
	switch {
	case pv.host:
		return slices.ContainsFunc(c.host, func(a netip.Addr) bool { return cidr.Contains(a.Unmap()) })
	case pv.k != nil:
		return slices.Contains(pv.k.sig, cidr)
	}
	return false
}

// portRanges are the ranges of protocol proto rule r names for a
// connection to pod dst's ports (named ports: dst's; nil dst: every
// member of the peer's class, for egress), or every port when it names
// no port.
func (c *Compiler) portRanges(r *model.ClusterRule, proto model.Proto, named func(yield func(model.NamedPort) bool)) [][2]uint16 {
	if len(r.Ports) == 0 {
		return [][2]uint16{{0, 65535}}
	}
	var out [][2]uint16
	for _, p := range r.Ports {
		switch {
		case p.Name != "":
			for np := range named {
				if np.Name == p.Name && np.Proto == proto {
					out = append(out, [2]uint16{np.Port, np.Port})
				}
			}
		case p.Proto != proto:
		case p.Port == 0:
			out = append(out, [2]uint16{0, 65535})
		case p.EndPort == 0:
			out = append(out, [2]uint16{p.Port, p.Port})
		default:
			out = append(out, [2]uint16{p.Port, p.EndPort})
		}
	}
	return out
}

// namedPorts are the named ports a connection of direction d reaches:
// the pod's own for ingress, the peer's pods' for egress.
func (c *Compiler) namedPorts(ts *tierSet, d Direction, pv peerView) func(yield func(model.NamedPort) bool) {
	return func(yield func(model.NamedPort) bool) {
		if d == Ingress {
			for _, np := range ts.pod.Ports {
				if !yield(np) {
					return
				}
			}
			return
		}
		if pv.k == nil {
			return
		}
		for id := range pv.k.members {
			if ps := c.pods[id]; ps != nil {
				for _, np := range ps.pod.Ports {
					if !yield(np) {
						return
					}
				}
			}
		}
	}
}

// decide is the verdict of the tiers for a connection of direction d
// with peer pv on proto/port (proto 0: a protocol without ports), and the
// cluster rule that gave it (nil: NetworkPolicy's, or the default).
func (c *Compiler) decide(ts *tierSet, d Direction, rules []TierRule, pv peerView, proto model.Proto, port uint16) (bool, *TierRule) {
	return c.decideBy(ts, d, rules, proto, port, func(r *model.ClusterRule) bool {
		return c.matchesPeer(r, pv) && c.matchesPort(ts, d, r, pv, proto, port)
	}, func() bool { return c.t.allows(ts.npRS, d, pv.id, proto, port) })
}

// decideBy is decide with the tests of whether a rule matches the
// connection and whether NetworkPolicy allows it given (function answers
// them from what it chose once).
func (c *Compiler) decideBy(ts *tierSet, d Direction, rules []TierRule, proto model.Proto, port uint16,
	matches func(*model.ClusterRule) bool, npAllows func() bool) (bool, *TierRule) {
	tier := model.AdminTier
	passed := false
	for i := range rules {
		r := &rules[i]
		if r.Policy.Tier != tier {
			// The Admin tier is over: NetworkPolicy, then the Baseline.
			if ts.npIsolated[dirIndex(d)] {
				return npAllows(), nil
			}
			tier, passed = model.BaselineTier, false
		}
		if passed || !matches(r.Rule) {
			continue
		}
		c.noteConflicts(rules, i, matches)
		switch r.Rule.Action {
		case model.Accept:
			return true, r
		case model.Deny:
			return false, r
		default: // Pass: the rest of this tier is skipped
			passed = true
		}
	}
	if tier == model.AdminTier && ts.npIsolated[dirIndex(d)] {
		return npAllows(), nil
	}
	return true, nil
}

// noteConflicts, while compiling, notes the policies after rules[i]'s
// (which decides) at its tier and priority with a rule that matches the
// same connection and does something else: the API lets either apply.
func (c *Compiler) noteConflicts(rules []TierRule, i int, matches func(*model.ClusterRule) bool) {
	if c.tiers.conflictsSeen == nil {
		return // not compiling (attribution)
	}
	r := &rules[i]
	for j := i + 1; j < len(rules); j++ {
		o := &rules[j]
		if o.Policy.Tier != r.Policy.Tier || o.Policy.Priority != r.Policy.Priority {
			return
		}
		if o.Policy != r.Policy && o.Rule.Action != r.Rule.Action && matches(o.Rule) {
			c.tiers.conflictsSeen[TierConflict{First: r.Policy.Name, Second: o.Policy.Name, Tier: r.Policy.Tier, Priority: r.Policy.Priority}] = struct{}{}
		}
	}
}

func (c *Compiler) matchesPort(ts *tierSet, d Direction, r *model.ClusterRule, pv peerView, proto model.Proto, port uint16) bool {
	if len(r.Ports) == 0 {
		return true
	}
	if proto == 0 {
		return false // a rule on ports never matches a protocol without them
	}
	for _, rg := range c.portRanges(r, proto, c.namedPorts(ts, d, pv)) {
		if port >= rg[0] && port <= rg[1] {
			return true
		}
	}
	return false
}

// span is a range of ports with one verdict.
type span struct {
	lo, hi uint16
	allow  bool
}

// portFunc is a peer's verdicts in one direction: by protocol with ports
// (portProtos), and for the others.
type portFunc struct {
	protos [len(portProtos)][]span
	other  bool
}

var portProtos = [...]model.Proto{model.TCP, model.UDP, model.SCTP}

func (f *portFunc) equal(g *portFunc) bool {
	if f.other != g.other {
		return false
	}
	for i := range f.protos {
		if !slices.Equal(f.protos[i], g.protos[i]) {
			return false
		}
	}
	return true
}

// uniform says whether every port of every protocol has one verdict.
func (f *portFunc) uniform() bool {
	for _, s := range f.protos {
		if len(s) != 1 || s[0].allow != f.other {
			return false
		}
	}
	return true
}

// function computes peer pv's verdicts: each protocol's ports split where
// a rule's range or a NetworkPolicy entry begins or ends, each piece
// decided once.
func (c *Compiler) function(ts *tierSet, d Direction, rules []TierRule, np []Entry, pv peerView) *portFunc {
	f := &portFunc{}
	// Only the rules naming pv can decide for it, and decide gives the
	// same verdict over them alone (the tiers' order is kept): choose
	// them once, not at every point of the function (a selector's
	// evaluation was most of a compile: cluster-policy-profile.md).
	// Their port ranges too, once per protocol.
	rules = slices.DeleteFunc(slices.Clone(rules), func(r TierRule) bool { return !c.matchesPeer(r.Rule, pv) })
	ranges := make(map[*model.ClusterRule][][2]uint16, len(rules))
	var port uint16
	inRanges := func(r *model.ClusterRule) bool {
		for _, rg := range ranges[r] {
			if port >= rg[0] && port <= rg[1] {
				return true
			}
		}
		return false
	}
	// NetworkPolicy's verdict from its entries for pv and any peer (np,
	// a few), as Tables.allows reads them, without a lookup per point.
	var proto model.Proto
	npAllows := func() bool {
		for _, e := range np {
			if e.Peer != pv.id && e.Peer != AnyPeer {
				continue
			}
			if e.Proto == 0 && e.PortBits == 0 || proto != 0 && e.Proto == proto && e.PortBits <= 16 &&
				(e.PortBits == 0 || port&^(1<<(16-e.PortBits)-1) == e.Port) {
				return true
			}
		}
		return false
	}
	for i := range portProtos {
		proto = portProtos[i]
		bounds := []uint32{0}
		for _, r := range rules {
			ranges[r.Rule] = c.portRanges(r.Rule, proto, c.namedPorts(ts, d, pv))
			for _, rg := range ranges[r.Rule] {
				bounds = append(bounds, uint32(rg[0]), uint32(rg[1])+1)
			}
		}
		for _, e := range np {
			if e.Proto == proto && (e.Peer == pv.id || e.Peer == AnyPeer) {
				size := uint32(1) << (16 - e.PortBits)
				bounds = append(bounds, uint32(e.Port), uint32(e.Port)+size)
			}
		}
		slices.Sort(bounds)
		bounds = slices.Compact(bounds)
		for j, b := range bounds {
			if b > 65535 {
				break
			}
			hi := uint32(65535)
			if j+1 < len(bounds) && bounds[j+1] <= 65536 {
				hi = bounds[j+1] - 1
			}
			port = uint16(b)
			allow, _ := c.decideBy(ts, d, rules, proto, port, inRanges, npAllows)
			if n := len(f.protos[i]); n > 0 && f.protos[i][n-1].allow == allow {
				f.protos[i][n-1].hi = uint16(hi)
				continue
			}
			f.protos[i] = append(f.protos[i], span{lo: uint16(b), hi: uint16(hi), allow: allow})
		}
	}
	// A protocol without ports: the rules that name no port.
	proto, port = 0, 0
	f.other, _ = c.decideBy(ts, d, rules, 0, 0, func(r *model.ClusterRule) bool { return len(r.Ports) == 0 }, npAllows)
	return f
}

// emit writes f as peer's entries of tier set rs in direction d.
func emit(out map[Entry]bool, rs uint32, d Direction, peer Identity, f *portFunc) {
	out[Entry{RuleSet: rs, Dir: d, Peer: peer}] = f.other
	if f.uniform() {
		return
	}
	for i, proto := range portProtos {
		spans := f.protos[i]
		if len(spans) == 1 && spans[0].allow == f.other {
			continue // every-protocol entry says it
		}
		for _, s := range spans {
			for p := range portPrefixes(s.lo, s.hi) {
				out[Entry{RuleSet: rs, Dir: d, Peer: peer, Proto: proto, Port: p.port, PortBits: p.bits}] = s.allow
			}
		}
	}
}

// clusterPolicyBlocks are the networks of cp's rules, as policyBlocks
// gives a NetworkPolicy's, and the addresses of the nodes its nodes peers
// select: each makes a class of the addresses in it.
func clusterPolicyBlocks(cl *Cluster, cp *model.ClusterPolicy) []netip.Prefix {
	var out []netip.Prefix
	for _, rules := range [][]model.ClusterRule{cp.Ingress, cp.Egress} {
		for _, r := range rules {
			for _, sel := range r.Nodes {
				for _, a := range cl.nodeAddrs(sel) {
					a = a.Unmap()
					out = append(out, netip.PrefixFrom(a, a.BitLen()))
				}
			}
			for _, p := range r.Peers {
				if p.Block != nil {
					out = append(out, p.Block.CIDR)
					if coversMappedV4(p.Block.CIDR) {
						out = append(out, allV4)
					}
				}
			}
		}
	}
	return out
}

// tierState is what compileTiers keeps between compilations.
type tierState struct {
	ids  map[string]uint32 // tier set numbers, by key: stable while the set lives
	sets map[uint32]*tierSet
	// endpoints: the addresses whose endpoint a tier set overrides.
	endpoints map[netip.Addr]Endpoint
	// peers: every identity a rule may name, for attribution.
	peers map[Identity]peerView
	// conflicts: what the last compilation found (noteConflicts), for
	// Events; conflictsSeen collects them while a function is computed.
	conflicts     []TierConflict
	conflictsSeen map[TierConflict]struct{}
	// columns: each set's functions as last computed, and what they
	// were computed from (tiers_memo.go).
	columns map[columnKey]*tierColumns
	globals tierGlobals
	// subjects: which policies select each pod of this node, as last
	// found (selecting).
	subjects map[model.PodID]*subjectOf
	// blocks: each ClusterNetworkPolicy's block prefixes as counted in
	// blockRefs (TakeClusterPolicies).
	blocks map[string][]netip.Prefix
}

// TierConflict is two ClusterNetworkPolicies of one tier and priority
// whose rules of different actions match one connection of a pod both
// select: the API leaves which applies to the implementation (netcube: by
// name, First first).
type TierConflict struct {
	First, Second string
	Tier          model.Tier
	Priority      int32
}

func (tc TierConflict) String() string {
	return fmt.Sprintf("ClusterNetworkPolicies %s and %s are both in the %s tier at priority %d, select the same pods and have rules of different actions for the same connections: %s is evaluated first (by name)",
		tc.First, tc.Second, tc.Tier, tc.Priority, tc.First)
}

// TierConflicts are the conflicts the last compilation found.
func (c *Compiler) TierConflicts() []TierConflict { return c.tiers.conflicts }

// compileTiers brings the tier sets up to date and notes what changed.
func (c *Compiler) compileTiers() {
	st := &c.tiers
	if len(c.cl.ClusterPolicies) == 0 && len(st.endpoints) == 0 && len(c.t.Verdicts) == 0 {
		return
	}
	if st.ids == nil {
		st.ids = map[string]uint32{}
	}
	cps := slices.SortedFunc(maps.Values(c.cl.ClusterPolicies), tierOrder)
	sets := map[string]*tierSet{}
	endpoints := map[netip.Addr]Endpoint{}
	seen := map[model.PodID]bool{}
	defer func() { maps.DeleteFunc(st.subjects, func(id model.PodID, _ *subjectOf) bool { return !seen[id] }) }()
	for _, ps := range c.pods {
		if !ps.local || ps.pod.HostNetwork {
			continue
		}
		sel := c.selecting(cps, ps.pod, seen)
		if len(sel) == 0 {
			continue
		}
		names := make([]string, len(sel))
		for i, cp := range sel {
			names[i] = cp.Name
		}
		key := fmt.Sprintf("%d\x00%s", ps.ruleSet, strings.Join(names, "\x00"))
		ts := sets[key]
		if ts == nil {
			id, ok := st.ids[key]
			if !ok {
				id = c.nextRuleSet
				c.nextRuleSet++
				st.ids[key] = id
			}
			ts = &tierSet{id: id, npRS: ps.ruleSet, pod: ps.pod, policies: sel}
			if es := c.eps[ps.pod.ID]; es != nil {
				ts.npIsolated = [2]bool{es.ingress > 0, es.egress > 0}
			}
			for d := range ts.isolated {
				ts.isolated[d] = ts.npIsolated[d] || len(ts.rules([]Direction{Ingress, Egress}[d])) > 0
			}
			sets[key] = ts
		}
		for _, a := range ps.pod.IPs {
			endpoints[a] = Endpoint{ID: c.endpointID(ps.pod.ID), RuleSet: ts.id, IsolatedIngress: ts.isolated[0], IsolatedEgress: ts.isolated[1]}
		}
	}
	for key := range st.ids {
		if _, ok := sets[key]; !ok {
			delete(st.ids, key)
		}
	}

	// Each set's functions, computed again where their inputs changed
	// (tiers_memo.go).
	if st.columns == nil {
		st.columns = map[columnKey]*tierColumns{}
	}
	if c.t.Verdicts == nil {
		c.t.Verdicts = map[Entry]bool{}
	}
	c.notePassInputs()
	own := c.ownEntries(sets)
	peers := c.tierPeers()
	ports := map[Identity][]model.NamedPort{}
	live := map[columnKey]bool{}
	st.sets = map[uint32]*tierSet{}
	for _, ts := range sets {
		st.sets[ts.id] = ts
		for _, d := range []Direction{Ingress, Egress} {
			c.computeColumns(ts, d, own[[2]uint32{ts.npRS, uint32(d)}], peers, ports)
			live[columnKey{ts.id, d}] = true
		}
	}
	c.dropColumns(live)
	st.peers = peers
	st.conflicts = c.passConflicts()

	// What changed: the endpoints overridden or given back.
	for a := range st.endpoints {
		if _, ok := endpoints[a]; !ok {
			c.refreshAddr(a) // NetworkPolicy's own endpoint, or none
		}
	}
	for a, ep := range endpoints {
		if old, ok := c.t.Endpoints[a]; !ok || old != ep {
			c.t.Endpoints[a] = ep
			c.changed.endpoint(a)
		}
	}
	st.endpoints = endpoints
}

// tierPeers are every identity a cluster rule may tell apart.
func (c *Compiler) tierPeers() map[Identity]peerView {
	out := make(map[Identity]peerView, len(c.classes)+2)
	for _, k := range c.classes {
		out[k.id] = peerView{id: k.id, k: k}
	}
	out[World] = peerView{id: World}
	out[Host] = peerView{id: Host, host: true}
	return out
}
