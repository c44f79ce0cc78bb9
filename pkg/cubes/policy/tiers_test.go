package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// The tiers' oracle: the API's evaluation written out as it reads, for
// one connection, with none of the compiler's classes, rule sets or
// entries. The compiled tables (Tables.Allows: the datapath's lookups)
// must agree with it on every connection.

func oracleDir(cl *Cluster, self *model.Pod, peer netip.Addr, d Direction, proto model.Proto, port uint16, host []netip.Addr) bool {
	if d == Ingress && slices.Contains(host, peer) {
		return true // kubelet's probes
	}
	peerPod, isPod := cl.PodAt(peer)
	nsl := cl.nsLabels(self.ID.Namespace)
	matchPeer := func(r *model.ClusterRule) bool {
		if r.Everyone {
			return true
		}
		for _, p := range r.Peers {
			if p.Block != nil && p.Block.CIDR.Contains(peer) {
				return true
			}
			if p.Block == nil && isPod && p.Namespaces.Matches(labelSet(cl.nsLabels(peerPod.ID.Namespace))) && p.Pods.Matches(labelSet(peerPod.Labels)) {
				return true
			}
		}
		for _, sel := range r.Nodes {
			if slices.Contains(cl.nodeAddrs(sel), peer) {
				return true
			}
		}
		return false
	}
	dst := self
	if d == Egress {
		dst = peerPod
	}
	matchPort := func(ports []model.PolicyPort) bool {
		if len(ports) == 0 {
			return true
		}
		for _, p := range ports {
			switch {
			case proto == 0:
			case p.Name != "":
				if (p.Proto == 0 || p.Proto == proto) && dst != nil && slices.ContainsFunc(dst.Ports, func(np model.NamedPort) bool { return np.Name == p.Name && np.Proto == proto && np.Port == port }) {
					return true
				}
			case p.Proto != proto:
			case p.Port == 0, p.EndPort == 0 && p.Port == port, p.EndPort != 0 && port >= p.Port && port <= p.EndPort:
				return true
			}
		}
		return false
	}
	var cps []*model.ClusterPolicy
	for _, cp := range cl.ClusterPolicies {
		if selectsPod(cp, self, nsl) {
			cps = append(cps, cp)
		}
	}
	slices.SortFunc(cps, tierOrder)
	tierVerdict := func(tier model.Tier) (decided, allow bool) {
		for _, cp := range cps {
			if cp.Tier != tier {
				continue
			}
			rules := cp.Ingress
			if d == Egress {
				rules = cp.Egress
			}
			for i := range rules {
				r := &rules[i]
				if !matchPeer(r) || !matchPort(r.Ports) {
					continue
				}
				switch r.Action {
				case model.Accept:
					return true, true
				case model.Deny:
					return true, false
				default:
					return false, false
				}
			}
		}
		return false, false
	}
	if decided, allow := tierVerdict(model.AdminTier); decided {
		return allow
	}
	isolated, allowed := false, false
	for _, np := range cl.Policies {
		if np.ID.Namespace != self.ID.Namespace || !np.Pods.Matches(labelSet(self.Labels)) {
			continue
		}
		iso, rules := np.IsolatesIngress, np.Ingress
		if d == Egress {
			iso, rules = np.IsolatesEgress, np.Egress
		}
		if !iso {
			continue
		}
		isolated = true
		for _, r := range rules {
			peerOK := len(r.Peers) == 0
			for _, p := range r.Peers {
				switch {
				case p.Block != nil:
					peerOK = peerOK || p.Block.Contains(peer)
				case isPod:
					nsOK := peerPod.ID.Namespace == self.ID.Namespace
					if p.Namespaces != nil {
						nsOK = p.Namespaces.Matches(labelSet(cl.nsLabels(peerPod.ID.Namespace)))
					}
					peerOK = peerOK || nsOK && p.Pods.Matches(labelSet(peerPod.Labels))
				}
			}
			if peerOK && matchPort(r.Ports) {
				allowed = true
			}
		}
	}
	if isolated {
		return allowed
	}
	if decided, allow := tierVerdict(model.BaselineTier); decided {
		return allow
	}
	return true
}

func oracleAllows(cl *Cluster, src, dst netip.Addr, proto model.Proto, port uint16, host []netip.Addr) bool {
	if src == dst {
		return true
	}
	if p, ok := cl.PodAt(src); ok && !oracleDir(cl, p, dst, Egress, proto, port, host) {
		return false
	}
	if p, ok := cl.PodAt(dst); ok && !oracleDir(cl, p, src, Ingress, proto, port, host) {
		return false
	}
	return true
}

func sel(s string) labels.Selector {
	l, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}

func pod(ns, name, ip string, l map[string]string, ports ...model.NamedPort) *model.Pod {
	return &model.Pod{ID: model.PodID{Namespace: ns, Name: name}, Labels: l, IPs: []netip.Addr{netip.MustParseAddr(ip)}, Ports: ports}
}

// tierCluster is the upstream suite's shape: namespaces named after
// houses, two pods each, one named port.
func tierCluster() (*Cluster, []netip.Addr) {
	cl := NewCluster()
	web := model.NamedPort{Name: "web", Port: 80, Proto: model.TCP}
	for i, ns := range []string{"gryffindor", "slytherin", "hufflepuff", "ravenclaw"} {
		cl.SetNamespace(ns, &model.Namespace{Name: ns, Labels: map[string]string{"conformance-house": ns}})
		for j, name := range []string{"a", "b"} {
			p := pod(ns, name, fmt.Sprintf("10.244.%d.%d", i, 10+j), map[string]string{"app": name}, web)
			cl.SetPod(p.ID, p)
		}
	}
	return cl, []netip.Addr{netip.MustParseAddr("172.30.0.11")}
}

var tierPorts = []struct {
	proto model.Proto
	port  uint16
}{{model.TCP, 80}, {model.TCP, 8080}, {model.TCP, 5353}, {model.UDP, 53}, {model.UDP, 5353}, {model.SCTP, 9003}, {0, 0}}

// checkAgainstOracle compiles cl and holds every pod pair and port
// against the oracle; it also updates a second compiler change by change
// (Update) and holds that to the same answers.
func checkAgainstOracle(t *testing.T, c *Compiler, cl *Cluster, host []netip.Addr, what string) int {
	t.Helper()
	c.Compile(cl, func(*model.Pod) bool { return true }, host)
	return checkTables(t, c, cl, host, what)
}

func checkTables(t *testing.T, c *Compiler, cl *Cluster, host []netip.Addr, what string) int {
	t.Helper()
	tb := c.Tables()
	var addrs []netip.Addr
	for _, p := range cl.sortedPods() {
		addrs = append(addrs, p.IPs...)
	}
	addrs = append(addrs, host[0], netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("172.30.1.12"))
	denied := 0
	for _, src := range addrs {
		for _, dst := range addrs {
			for _, pp := range tierPorts {
				got, want := tb.Allows(src, dst, pp.proto, pp.port), oracleAllows(cl, src, dst, pp.proto, pp.port, host)
				if got != want {
					t.Fatalf("%s: %s -> %s %s/%d: compiled %v, the API says %v", what, src, dst, pp.proto, pp.port, got, want)
				}
				if !want {
					denied++
				}
			}
		}
	}
	return denied
}

// TestTiersAsTheAPIReads: the suite's cases, each against the oracle and
// with the verdict the test names (the oracle could be wrong too).
func TestTiersAsTheAPIReads(t *testing.T) {
	cl, host := tierCluster()
	c := NewCompiler()
	ga, sa, ha := netip.MustParseAddr("10.244.0.10"), netip.MustParseAddr("10.244.1.10"), netip.MustParseAddr("10.244.2.10")
	houses := func(h string) []model.PolicyPeer {
		return []model.PolicyPeer{{Namespaces: sel("conformance-house=" + h), Pods: labels.Everything()}}
	}
	ns := func(h string) labels.Selector { return sel("conformance-house=" + h) }
	if checkAgainstOracle(t, c, cl, host, "no policy") != 0 {
		t.Fatal("no policy: something denied") // the positive control
	}
	tb := c.Tables()
	if len(tb.Verdicts) != 0 {
		t.Fatalf("no ClusterNetworkPolicy: %d tier entries", len(tb.Verdicts))
	}

	// Admin Deny from slytherin to gryffindor, on TCP 80 only.
	deny := &model.ClusterPolicy{Name: "deny-80", Tier: model.AdminTier, Priority: 10, Namespaces: ns("gryffindor"), Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Name: "r", Action: model.Deny, Peers: houses("slytherin"), Ports: []model.PolicyPort{{Proto: model.TCP, Port: 80}}}}}
	cl.SetClusterPolicy(deny.Name, deny)
	checkAgainstOracle(t, c, cl, host, "admin deny")
	tb = c.Tables()
	if tb.Allows(sa, ga, model.TCP, 80) || !tb.Allows(sa, ga, model.TCP, 8080) || !tb.Allows(ha, ga, model.TCP, 80) {
		t.Fatal("admin deny of slytherin on TCP 80: want only that denied")
	}

	// A NetworkPolicy in gryffindor allowing only hufflepuff; an Admin
	// Accept at a lower number (first) lets slytherin in on 8080 anyway.
	np := &model.Policy{ID: model.PolicyID{Namespace: "gryffindor", Name: "only-huff"}, Pods: labels.Everything(), IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Namespaces: ns("hufflepuff"), Pods: labels.Everything()}}}}}
	cl.SetPolicy(np.ID, np)
	accept := &model.ClusterPolicy{Name: "accept-8080", Tier: model.AdminTier, Priority: 5, Namespaces: ns("gryffindor"), Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Accept, Peers: houses("slytherin"), Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8000, EndPort: 9000}}}}}
	cl.SetClusterPolicy(accept.Name, accept)
	checkAgainstOracle(t, c, cl, host, "accept over networkpolicy")
	tb = c.Tables()
	if !tb.Allows(sa, ga, model.TCP, 8080) || tb.Allows(sa, ga, model.UDP, 53) || !tb.Allows(ha, ga, model.UDP, 53) {
		t.Fatal("accept 8000-9000 from slytherin over a NetworkPolicy of hufflepuff only")
	}

	// Pass: to NetworkPolicy, which isolates; Baseline never reached.
	pass := &model.ClusterPolicy{Name: "pass-all", Tier: model.AdminTier, Priority: 1, Namespaces: ns("gryffindor"), Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Pass, Peers: houses("slytherin")}}}
	cl.SetClusterPolicy(pass.Name, pass)
	base := &model.ClusterPolicy{Name: "base-accept", Tier: model.BaselineTier, Priority: 1, Namespaces: labels.Everything(), Pods: labels.Everything(),
		Ingress: []model.ClusterRule{{Action: model.Accept, Peers: houses("slytherin")}},
		Egress:  []model.ClusterRule{{Action: model.Deny, Peers: []model.PolicyPeer{{Block: &model.IPBlock{CIDR: netip.MustParsePrefix("192.0.2.0/24")}}}}}}
	cl.SetClusterPolicy(base.Name, base)
	checkAgainstOracle(t, c, cl, host, "pass then networkpolicy")
	tb = c.Tables()
	if tb.Allows(sa, ga, model.TCP, 8080) {
		t.Fatal("pass from slytherin: the NetworkPolicy (hufflepuff only) decides, not the later accept or the baseline")
	}
	if tb.Allows(ha, netip.MustParseAddr("192.0.2.7"), model.TCP, 443) || !tb.Allows(ha, ga, model.TCP, 443) {
		t.Fatal("baseline egress deny of 192.0.2.0/24 for a pod no NetworkPolicy isolates: want only that denied")
	}

	// One tier and priority: rules for different peers apply both, no
	// conflict; rules of different actions for one connection conflict.
	same := func(name string, action model.RuleAction, peer string) *model.ClusterPolicy {
		return &model.ClusterPolicy{Name: name, Tier: model.AdminTier, Priority: 500, Namespaces: ns("ravenclaw"), Pods: labels.Everything(),
			Ingress: []model.ClusterRule{{Action: action, Peers: houses(peer)}}}
	}
	cl.SetClusterPolicy("same-a", same("same-a", model.Deny, "slytherin"))
	cl.SetClusterPolicy("same-b", same("same-b", model.Accept, "hufflepuff"))
	checkAgainstOracle(t, c, cl, host, "same priority, disjoint")
	if cs := c.TierConflicts(); len(cs) != 0 {
		t.Fatalf("same priority, disjoint peers: conflicts %v", cs)
	}
	cl.SetClusterPolicy("same-b", same("same-b", model.Accept, "slytherin"))
	checkAgainstOracle(t, c, cl, host, "same priority, one peer")
	if cs := c.TierConflicts(); len(cs) != 1 || cs[0].First != "same-a" || cs[0].Second != "same-b" {
		t.Fatalf("same priority, Deny and Accept of one peer: conflicts %v, want same-a before same-b", cs)
	}
	cl.SetClusterPolicy("same-a", nil)
	cl.SetClusterPolicy("same-b", nil)

	// Egress to nodes by their labels: another node's address, and this
	// node's (the Host identity).
	other := netip.MustParseAddr("172.30.1.12")
	cl.SetNode("node1", &model.NodeInfo{Name: "node1", Labels: map[string]string{"rack": "a"}, Addresses: host})
	cl.SetNode("node2", &model.NodeInfo{Name: "node2", Labels: map[string]string{"rack": "b"}, Addresses: []netip.Addr{other}})
	nodes := &model.ClusterPolicy{Name: "no-rack-b", Tier: model.AdminTier, Priority: 0, Namespaces: ns("ravenclaw"), Pods: labels.Everything(),
		Egress: []model.ClusterRule{{Action: model.Deny, Nodes: []labels.Selector{sel("rack=b")}},
			{Action: model.Deny, Nodes: []labels.Selector{sel("rack=a")}, Ports: []model.PolicyPort{{Proto: model.TCP, Port: 10250}}}}}
	cl.SetClusterPolicy(nodes.Name, nodes)
	checkAgainstOracle(t, c, cl, host, "nodes")
	tb = c.Tables()
	ra := netip.MustParseAddr("10.244.3.10")
	if tb.Allows(ra, other, model.TCP, 22) || !tb.Allows(ha, other, model.TCP, 22) {
		t.Fatal("egress Deny to rack=b nodes: want ravenclaw's pods denied node2, others not")
	}
	if tb.Allows(ra, host[0], model.TCP, 10250) || !tb.Allows(ra, host[0], model.TCP, 22) {
		t.Fatal("egress Deny to rack=a nodes on 10250: want this node's kubelet port denied, its other ports not")
	}
	// The nodes relabelled under the same policy (the reconciler
	// compiles all on a node's change): this node leaves rack=a and
	// node2 joins it; then node2 leaves too.
	cl.SetNode("node1", &model.NodeInfo{Name: "node1", Labels: map[string]string{"rack": "c"}, Addresses: host})
	cl.SetNode("node2", &model.NodeInfo{Name: "node2", Labels: map[string]string{"rack": "a"}, Addresses: []netip.Addr{other}})
	checkAgainstOracle(t, c, cl, host, "nodes relabelled")
	if tb = c.Tables(); !tb.Allows(ra, host[0], model.TCP, 10250) || tb.Allows(ra, other, model.TCP, 10250) || !tb.Allows(ra, other, model.TCP, 22) {
		t.Fatal("this node moved to rack=c, node2 to rack=a: want this node's 10250 allowed, node2's denied, node2's 22 allowed")
	}
	cl.SetNode("node2", &model.NodeInfo{Name: "node2", Labels: map[string]string{"rack": "c"}, Addresses: []netip.Addr{other}})
	checkAgainstOracle(t, c, cl, host, "nodes relabelled again")
	cl.SetClusterPolicy(nodes.Name, nil)

	// Everything removed: the tier entries go, the NetworkPolicy stays.
	for _, n := range []string{deny.Name, accept.Name, pass.Name, base.Name} {
		cl.SetClusterPolicy(n, nil)
	}
	checkAgainstOracle(t, c, cl, host, "removed")
	if tb = c.Tables(); len(tb.Verdicts) != 0 {
		t.Fatalf("every ClusterNetworkPolicy removed: %d tier entries left", len(tb.Verdicts))
	}
}

// TestTiersRandom: random policies of every kind against the oracle.
func TestTiersRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 71))
	houses := []string{"gryffindor", "slytherin", "hufflepuff", "ravenclaw"}
	actions := []model.RuleAction{model.Accept, model.Deny, model.Pass}
	randPeers := func() []model.PolicyPeer {
		switch r.IntN(4) {
		case 0:
			return []model.PolicyPeer{{Namespaces: sel("conformance-house=" + houses[r.IntN(4)]), Pods: labels.Everything()}}
		case 1:
			return []model.PolicyPeer{{Namespaces: labels.Everything(), Pods: sel("app=" + []string{"a", "b"}[r.IntN(2)])}}
		case 2:
			return []model.PolicyPeer{{Block: &model.IPBlock{CIDR: netip.MustParsePrefix([]string{"10.244.0.0/16", "10.244.1.0/24", "192.0.2.0/24", "10.244.2.0/31"}[r.IntN(4)])}}}
		}
		return []model.PolicyPeer{{Namespaces: labels.Everything(), Pods: labels.Everything()}}
	}
	randPorts := func(np bool) []model.PolicyPort {
		switch r.IntN(5) {
		case 0:
			return []model.PolicyPort{{Proto: model.TCP, Port: 80}}
		case 1:
			return []model.PolicyPort{{Proto: model.UDP, Port: 5000, EndPort: 6000}}
		case 2:
			if np {
				return []model.PolicyPort{{Name: "web", Proto: model.TCP}} // a NetworkPolicy's named port has a protocol
			}
			return []model.PolicyPort{{Name: "web"}}
		case 3:
			return []model.PolicyPort{{Proto: model.SCTP}}
		}
		return nil
	}
	randRules := func() []model.ClusterRule {
		var out []model.ClusterRule
		for range r.IntN(3) {
			out = append(out, model.ClusterRule{Action: actions[r.IntN(3)], Peers: randPeers(), Ports: randPorts(false)})
		}
		return out
	}
	denied, updated, compiledAll := 0, 0, 0
	for round := range 300 {
		cl, host := tierCluster()
		c := NewCompiler()
		for i := range 1 + r.IntN(4) {
			tier := model.AdminTier
			if r.IntN(2) == 0 {
				tier = model.BaselineTier
			}
			cp := &model.ClusterPolicy{Name: fmt.Sprintf("cnp-%d", i), Tier: tier, Priority: int32(r.IntN(3)),
				Namespaces: sel("conformance-house in (" + houses[r.IntN(4)] + "," + houses[r.IntN(4)] + ")"), Pods: labels.Everything(),
				Ingress: randRules(), Egress: randRules()}
			cl.SetClusterPolicy(cp.Name, cp)
		}
		for i := range r.IntN(3) {
			h := houses[r.IntN(4)]
			np := &model.Policy{ID: model.PolicyID{Namespace: h, Name: fmt.Sprintf("np-%d", i)}, Pods: sel("app=a"),
				IsolatesIngress: r.IntN(2) == 0, IsolatesEgress: r.IntN(2) == 0}
			for range r.IntN(3) {
				rule := model.PolicyRule{Ports: randPorts(true)}
				if p := randPeers(); p[0].Block != nil || r.IntN(2) == 0 {
					rule.Peers = p
				}
				if len(rule.Ports) > 0 && rule.Ports[0].Name != "" {
					// A named port of a rule for every peer is every
					// pod's port to any address (the NetworkPolicy
					// compiler's reading, held to cyclonus elsewhere):
					// here, only pods.
					rule.Peers = []model.PolicyPeer{{Namespaces: labels.Everything(), Pods: labels.Everything()}}
				}
				np.Ingress = append(np.Ingress, rule)
				np.Egress = append(np.Egress, rule)
			}
			cl.SetPolicy(np.ID, np)
		}
		denied += checkAgainstOracle(t, c, cl, host, fmt.Sprintf("round %d", round))
		// Changes that Update applies (not a whole Compile): a pod
		// relabelled, one added, a namespace relabelled.
		moved := pod("slytherin", "a", "10.244.1.10", map[string]string{"app": "b"}, model.NamedPort{Name: "web", Port: 80, Proto: model.TCP})
		added := pod("ravenclaw", "c", "10.244.3.12", map[string]string{"app": "a"}, model.NamedPort{Name: "web", Port: 80, Proto: model.TCP})
		cl.SetPod(moved.ID, moved)
		cl.SetPod(added.ID, added)
		cl.SetNamespace("hufflepuff", &model.Namespace{Name: "hufflepuff", Labels: map[string]string{"conformance-house": "gryffindor"}})
		c.Update([]model.PodID{moved.ID, added.ID}, []string{"hufflepuff"}, nil)
		denied += checkTables(t, c, cl, host, fmt.Sprintf("round %d, updated", round))
		// ClusterNetworkPolicies edited, added and deleted as the
		// reconciler takes them: the tier sets they touch compiled
		// again (Update), or all when their networks change a block.
		for step := range 3 {
			var names []string
			for name, old := range cl.ClusterPolicies {
				if r.IntN(2) == 0 {
					edited := *old
					edited.Ingress, edited.Egress = randRules(), randRules()
					cl.SetClusterPolicy(name, &edited)
					names = append(names, name)
				}
			}
			if r.IntN(2) == 0 {
				name := fmt.Sprintf("cnp-new-%d", step)
				cl.SetClusterPolicy(name, &model.ClusterPolicy{Name: name, Tier: model.AdminTier, Priority: int32(r.IntN(3)),
					Namespaces: sel("conformance-house=" + houses[r.IntN(4)]), Pods: labels.Everything(), Ingress: randRules(), Egress: randRules()})
				names = append(names, name)
			}
			if victim := fmt.Sprintf("cnp-%d", r.IntN(4)); r.IntN(3) == 0 && cl.ClusterPolicies[victim] != nil {
				cl.SetClusterPolicy(victim, nil)
				names = append(names, victim)
			}
			if c.TakeClusterPolicies(names) {
				c.Compile(cl, func(*model.Pod) bool { return true }, host)
				compiledAll++
			} else {
				c.Update(nil, nil, nil)
				updated++
			}
			denied += checkTables(t, c, cl, host, fmt.Sprintf("round %d, ClusterNetworkPolicies %v changed (step %d)", round, names, step))
		}
		// A NetworkPolicy's rules edited under the tiers: the columns of
		// the peers whose NetworkPolicy entries changed compute again.
		for id, np := range cl.Policies {
			edited := *np
			edited.Ingress, edited.Egress = nil, nil
			for range 1 + r.IntN(2) {
				rule := model.PolicyRule{Ports: randPorts(true), Peers: randPeers()}
				if len(rule.Ports) > 0 && rule.Ports[0].Name != "" {
					rule.Peers = []model.PolicyPeer{{Namespaces: labels.Everything(), Pods: labels.Everything()}}
				}
				edited.Ingress, edited.Egress = append(edited.Ingress, rule), append(edited.Egress, rule)
			}
			cl.SetPolicy(id, &edited)
			c.Update(nil, nil, []model.PolicyID{id})
			denied += checkTables(t, c, cl, host, fmt.Sprintf("round %d, NetworkPolicy %s edited", round, id))
			break
		}
	}
	if updated == 0 || compiledAll == 0 {
		t.Fatalf("ClusterNetworkPolicy changes: %d compiled by Update, %d by Compile: both paths must be tried", updated, compiledAll)
	}
	t.Logf("ClusterNetworkPolicy changes: %d compiled by Update, %d by Compile", updated, compiledAll)
	if denied == 0 {
		t.Fatal("no connection denied in any round: the test tests nothing")
	}
	t.Logf("%d connections denied over the rounds, each as the API says", denied)
}
