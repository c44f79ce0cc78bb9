package policy_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// endpointOf reads ip's pol_endpoints entry.
func endpointOf(t *testing.T, fake *cubetest.Fake, ip string) (datapath.PolicyEndpoint, bool) {
	t.Helper()
	v, ok, err := cube.Get[datapath.Addr, datapath.PolicyEndpoint](fake.Maps, policy.MapEndpoints, datapath.AddrFrom(netip.MustParseAddr(ip)))
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

// rulesOf counts the entries (both tables) filed under rule set rs.
func rulesOf(t *testing.T, fake *cubetest.Fake, rs uint32) int {
	t.Helper()
	n := 0
	for _, name := range []string{policy.MapRules, policy.MapEntries} {
		if err := cube.Each(fake.Maps, name, func(k datapath.PolicyEntryKey, _ datapath.PolicyEntry) bool {
			if k.RuleSet == rs {
				n++
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// isolatedBoth: the endpoint is judged both ways and allowed nothing.
func quarantined(t *testing.T, fake *cubetest.Fake, ep datapath.PolicyEndpoint) bool {
	want := datapath.IsolatedIngress | datapath.IsolatedEgress
	return ep.Flags&want == want && rulesOf(t, fake, ep.RuleSet) == 0
}

// TestFullIdentityMapFailsClosed: pol_hosts holds every pod address of the
// cluster; once it is full, a pass must still revoke what a policy no
// longer allows, and a new pod of this node whose identity does not fit
// is quarantined (isolated both ways, no rule), not left open, until it
// fits.
func TestFullIdentityMapFailsClosed(t *testing.T) {
	// Room for the three pods and the node's address, and no more.
	fake := cubetest.New(t, map[string]uint32{policy.MapHosts: 4}, policy.Cube{})
	web := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web"})
	client := pod("x", "client", "node1", "10.244.1.6", map[string]string{"app": "client"})
	db := pod("x", "db", "node1", "10.244.1.8", map[string]string{"app": "db"})
	r := startWebPolicy(t, fake, web, client, db)
	r.OnPoliciesSynced()

	// Positive control: everything fits; web receives from client.
	eventually(t, "the policy written", func() bool { return fake.Len(policy.MapRules) == 1 })
	webEP, ok := endpointOf(t, fake, "10.244.1.5")
	if !ok || webEP.Flags != datapath.IsolatedIngress || rulesOf(t, fake, webEP.RuleSet) != 1 {
		t.Fatalf("web's endpoint %+v (found %v), %d rules: want isolated for ingress with client's rule", webEP, ok, rulesOf(t, fake, webEP.RuleSet))
	}

	// The map is full: a new pod (selected by a second policy, which
	// isolates its egress) comes, and web's policy is narrowed to allow
	// nobody in the same pass.
	fresh := pod("x", "fresh", "node1", "10.244.1.7", map[string]string{"app": "fresh"})
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "fresh"}, fresh)
	sel, _ := labels.Parse("app=fresh")
	r.OnPolicy(types.NamespacedName{Namespace: "x", Name: "fresh"}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "fresh"},
		Pods: sel, IsolatesEgress: true, Egress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: labels.Everything()}}}}})
	nobody, _ := labels.Parse("app=nobody")
	webSel, _ := labels.Parse("app=web")
	r.OnPolicy(types.NamespacedName{Namespace: "x", Name: "web"}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "web"},
		Pods: webSel, IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: nobody}}, Ports: []model.PolicyPort{{Proto: model.TCP, Port: 80}}}}})

	eventually(t, "web's revoked rule deleted though the identity map is full", func() bool {
		ep, ok := endpointOf(t, fake, "10.244.1.5")
		return ok && rulesOf(t, fake, ep.RuleSet) == 0
	})
	eventually(t, "the new pod quarantined", func() bool {
		ep, ok := endpointOf(t, fake, "10.244.1.7")
		return ok && quarantined(t, fake, ep)
	})
	if ep, _ := endpointOf(t, fake, "10.244.1.5"); ep.Flags != datapath.IsolatedIngress {
		t.Errorf("web's endpoint %+v: its own policy is written, want it as its policy says (isolated for ingress)", ep)
	}

	// Room again (db deleted): the new pod gets its identity and its own
	// rules.
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "db"}, nil)
	eventually(t, "the new pod's own policy once its identity fits", func() bool {
		ep, ok := endpointOf(t, fake, "10.244.1.7")
		return ok && ep.Flags == datapath.IsolatedEgress && rulesOf(t, fake, ep.RuleSet) > 0
	})
}

// TestFullMapIsReported: a pass that cannot write says so in the
// reconciler's failures (the agent's /readyz and `netcube status`) and
// in an Event on each pod it quarantined, all cleared once it can.
func TestFullMapIsReported(t *testing.T) {
	fake := cubetest.New(t, map[string]uint32{policy.MapHosts: 3}, policy.Cube{})
	rep := &reports{msgs: map[string]string{}}
	web := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web"})
	client := pod("x", "client", "node1", "10.244.1.6", map[string]string{"app": "client"})
	r := policy.NewReconciler(fake.Maps, "node1", []netip.Addr{netip.MustParseAddr("172.30.0.11")})
	rr := &report.Reporter{Sink: rep}
	r.SetReporter(rr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	for _, p := range []*model.Pod{web, client} {
		r.OnPod(types.NamespacedName{Namespace: p.ID.Namespace, Name: p.ID.Name}, p)
	}
	r.OnNamespace("x", &model.Namespace{Name: "x"})
	sel, _ := labels.Parse("app=web")
	r.OnPolicy(types.NamespacedName{Namespace: "x", Name: "web"}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "web"},
		Pods: sel, IsolatesIngress: true})
	r.OnPoliciesSynced()
	<-r.PolicySynced()
	if f := r.PolicyFailures(); len(f) != 0 {
		t.Fatalf("failures with room for every identity: %v", f)
	}

	fresh := pod("x", "fresh", "node1", "10.244.1.7", map[string]string{"app": "web"})
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "fresh"}, fresh)
	eventually(t, "the failure reported", func() bool { return len(r.PolicyFailures()) == 2 })
	f := r.PolicyFailures()
	if err := f["policy maps"]; err == nil || !strings.Contains(err.Error(), "map pol_hosts is full (3 entries): raise --policy-identity-map-size") {
		t.Errorf("the maps' failure: %v", err)
	}
	if err := f["Pod x/fresh"]; err == nil || !strings.Contains(err.Error(), "quarantined") {
		t.Errorf("the pod's failure: %v", err)
	}
	if msg := rep.get("Pod x/fresh " + string(report.PolicyNotWritten)); !strings.Contains(msg, "quarantined") {
		t.Errorf("the pod's Event: %q", msg)
	}
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "client"}, nil)
	eventually(t, "the failure cleared", func() bool { return len(r.PolicyFailures()) == 0 })
	if n := rr.Count()[report.PolicyNotWritten]; n != 0 {
		t.Errorf("%d pods still reported", n)
	}
}
