package policy

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// TestRuleSets: this node's pods alike (namespace, labels, named ports)
// share one rule set, so their entries are written once; a pod with other
// named ports has its own, and a named port allows each pod its own
// number only; rule sets are never a pod's number, and go with their
// last pod. Each step is made by Update and checked against a fresh
// Compile's tables.
func TestRuleSets(t *testing.T) {
	ip := netip.MustParseAddr
	web := func(name, addr string, port uint16) *model.Pod {
		return &model.Pod{ID: model.PodID{Namespace: "a", Name: name}, Node: "n1", Labels: map[string]string{"app": "web"},
			IPs: []netip.Addr{ip(addr)}, Ports: []model.NamedPort{{Name: "http", Port: port, Proto: model.TCP}}}
	}
	w1, w2, w3 := web("w1", "10.0.1.1", 8080), web("w2", "10.0.1.2", 8080), web("w3", "10.0.1.3", 9090)
	client := &model.Pod{ID: model.PodID{Namespace: "a", Name: "c"}, Node: "n2", Labels: map[string]string{"app": "client"},
		IPs: []netip.Addr{ip("10.0.2.1")}}
	sel, _ := labels.Parse("app=web")
	from, _ := labels.Parse("app=client")
	pol := &model.Policy{ID: model.PolicyID{Namespace: "a", Name: "web"}, Pods: sel, IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: from}}, Ports: []model.PolicyPort{{Proto: model.TCP, Name: "http"}}}}}
	cl := NewCluster()
	for _, p := range []*model.Pod{w1, w2, w3, client} {
		cl.SetPod(p.ID, p)
	}
	cl.SetPolicy(pol.ID, pol)
	local := func(p *model.Pod) bool { return p.Node == "n1" }
	host := []netip.Addr{ip("172.30.0.11")}
	c := NewCompiler()
	tb := c.Compile(cl, local, host)
	same := func(step string) {
		t.Helper()
		full := NewCompiler()
		if diff := full.canonical(full.Compile(cl, local, host)).diff(c.canonical(c.Tables())); diff != "" {
			t.Fatalf("%s: Update differs from Compile:\n%s", step, diff)
		}
	}

	for _, want := range []struct {
		to   *model.Pod
		port uint16
		ok   bool
	}{{w1, 8080, true}, {w2, 8080, true}, {w3, 9090, true}, {w1, 9090, false}, {w2, 9090, false}, {w3, 8080, false}} {
		if got := tb.Allows(client.IPs[0], want.to.IPs[0], model.TCP, want.port); got != want.ok {
			t.Errorf("client -> %s:%d allowed %v, want %v (each pod's own http port)", want.to.ID.Name, want.port, got, want.ok)
		}
	}
	e1, e2, e3 := tb.Endpoints[w1.IPs[0]], tb.Endpoints[w2.IPs[0]], tb.Endpoints[w3.IPs[0]]
	if e1.RuleSet != e2.RuleSet || e1.RuleSet == e3.RuleSet {
		t.Errorf("rule sets w1 %d, w2 %d, w3 %d: want w1 and w2's alike, w3's its own", e1.RuleSet, e2.RuleSet, e3.RuleSet)
	}
	if e1.ID == e2.ID || len(tb.Entries) != 2 {
		t.Errorf("endpoints %d and %d, %d entries: want a number each, and one entry per rule set (2)", e1.ID, e2.ID, len(tb.Entries))
	}
	for _, e := range []Endpoint{e1, e2, e3} {
		for _, other := range []Endpoint{e1, e2, e3} {
			if e.RuleSet == other.ID {
				t.Errorf("rule set %d is also a pod's number", e.RuleSet)
			}
		}
	}

	// w1 leaves: its rule set stays with w2, its entry too.
	cl.SetPod(w1.ID, nil)
	c.Update([]model.PodID{w1.ID}, nil, nil)
	same("w1 deleted")
	if got := c.Tables().Endpoints[w2.IPs[0]].RuleSet; got != e2.RuleSet || !c.Tables().Allows(client.IPs[0], w2.IPs[0], model.TCP, 8080) {
		t.Errorf("w2 after w1 left: rule set %d (was %d), allowed on 8080: %v", got, e2.RuleSet,
			c.Tables().Allows(client.IPs[0], w2.IPs[0], model.TCP, 8080))
	}
	// w3 takes port 8080: it joins w2's rule set, and its own goes.
	w3b := web("w3", "10.0.1.3", 8080)
	cl.SetPod(w3.ID, w3b)
	c.Update([]model.PodID{w3.ID}, nil, nil)
	same("w3 on 8080")
	if got := c.Tables().Endpoints[w3.IPs[0]].RuleSet; got != e2.RuleSet || len(c.Tables().Entries) != 1 || len(c.ruleSets) != 1 {
		t.Errorf("w3 on w2's port: rule set %d (want w2's %d), %d entries, %d rule sets: want 1 and 1",
			got, e2.RuleSet, len(c.Tables().Entries), len(c.ruleSets))
	}
	// Every pod of this node gone: no rule set left.
	for _, p := range []*model.Pod{w2, w3} {
		cl.SetPod(p.ID, nil)
		c.Update([]model.PodID{p.ID}, nil, nil)
	}
	same("all gone")
	if len(c.ruleSets) != 0 || len(c.Tables().Entries) != 0 {
		t.Errorf("%d rule sets, %d entries left with no pod on this node", len(c.ruleSets), len(c.Tables().Entries))
	}
}
