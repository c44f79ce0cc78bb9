package policy_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/model"
)

// TestPoliciesOfNamesThePoliciesBehindAVerdict: an allowed connection is
// attributed to each policy with a rule allowing it (and to no other
// policy selecting the pod), a dropped one to every policy isolating the
// pod in that direction; a pod no policy selects, a direction no policy
// isolates, and a connection from the node have none. A policy change is
// seen at once (the answers kept are forgotten on each compilation).
func TestPoliciesOfNamesThePoliciesBehindAVerdict(t *testing.T) {
	fake := cubetest.New(t, nil, policy.Cube{})
	node := netip.MustParseAddr("172.30.0.11")
	r := policy.NewReconciler(fake.Maps, "node1", []netip.Addr{node})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	web := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web"})
	client := pod("x", "client", "node1", "10.244.1.6", map[string]string{"app": "client"})
	other := pod("x", "other", "node2", "10.244.2.7", map[string]string{"app": "other"})
	for _, p := range []*model.Pod{web, client, other} {
		r.OnPod(types.NamespacedName{Namespace: p.ID.Namespace, Name: p.ID.Name}, p)
	}
	r.OnNamespace("x", &model.Namespace{Name: "x"})
	sel := func(s string) labels.Selector { l, _ := labels.Parse(s); return l }
	setPolicy := func(name string, rules []model.PolicyRule) {
		r.OnPolicy(types.NamespacedName{Namespace: "x", Name: name}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: name},
			Pods: sel("app=web"), IsolatesIngress: true, Ingress: rules})
	}
	// from-client: port 80 from app=client; any-8080: port 8080 from anyone.
	setPolicy("from-client", []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: sel("app=client")}},
		Ports: []model.PolicyPort{{Proto: model.TCP, Port: 80}}}})
	setPolicy("any-8080", []model.PolicyRule{{Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8000, EndPort: 8100}}}})
	r.OnPoliciesSynced()
	eventually(t, "the policies compiled", func() bool {
		return r.PoliciesOf(web.IPs[0], false, client.IPs[0], model.TCP, 80, true) != nil
	})

	for _, c := range []struct {
		name    string
		local   *model.Pod
		egress  bool
		peer    netip.Addr
		port    uint16
		allowed bool
		want    []string
	}{
		{"client to web:80, allowed", web, false, client.IPs[0], 80, true, []string{"x/from-client"}},
		{"client to web:8080, allowed", web, false, client.IPs[0], 8080, true, []string{"x/any-8080"}},
		{"other to web:8080, allowed", web, false, other.IPs[0], 8080, true, []string{"x/any-8080"}},
		{"other to web:80, dropped", web, false, other.IPs[0], 80, false, []string{"x/any-8080", "x/from-client"}},
		{"web's egress: isolated by none", web, true, client.IPs[0], 80, false, nil},
		{"client: selected by none", client, false, web.IPs[0], 80, true, nil},
		{"from the node: always allowed", web, false, node, 80, true, nil},
	} {
		if got := r.PoliciesOf(c.local.IPs[0], c.egress, c.peer, model.TCP, c.port, c.allowed); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	// from-client now allows port 8080 too: both allow it.
	setPolicy("from-client", []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: sel("app=client")}},
		Ports: []model.PolicyPort{{Proto: model.TCP, Port: 80}, {Proto: model.TCP, Port: 8080}}}})
	want := []string{"x/any-8080", "x/from-client"}
	eventually(t, "the change seen", func() bool {
		return slices.Equal(r.PoliciesOf(web.IPs[0], false, client.IPs[0], model.TCP, 8080, true), want)
	})
}
