package policy_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestAdmitPod: the CNI plugin's ADD of a pod a policy selects returns
// only once the pod's endpoint is written at the address this node gave
// it, though the API's Pod status has no address yet; before the first
// whole pass, for a pod the cache never holds, and for one whose policy
// does not fit, it fails.
func TestAdmitPod(t *testing.T) {
	defer func(d time.Duration) { policy.AdmitTimeout = d }(policy.AdmitTimeout)
	policy.AdmitTimeout = 300 * time.Millisecond
	fake := cubetest.New(t, map[string]uint32{policy.MapHosts: 4}, policy.Cube{})
	client := pod("x", "client", "node1", "10.244.1.6", map[string]string{"app": "client"})
	r := startWebPolicy(t, fake, client)
	ctx := context.Background()
	addr := []netip.Addr{netip.MustParseAddr("10.244.1.5")}
	web := model.PodID{Namespace: "x", Name: "web"}

	if err := r.AdmitPod(ctx, web, "sandbox-1", addr); !errors.Is(err, policy.ErrNotSynced) {
		t.Fatalf("ADD before the first policy sync: %v, want %v", err, policy.ErrNotSynced)
	}
	r.OnPoliciesSynced()
	<-r.PolicySynced()

	// Not in the cache: refused after the bound.
	if err := r.AdmitPod(ctx, web, "sandbox-1", addr); err == nil || !strings.Contains(err.Error(), "not in the agent's cache") {
		t.Fatalf("ADD of a pod the cache does not hold: %v", err)
	}
	// The pod reaches the cache while ADD waits, with no address in its
	// status (the runtime has not started it): ADD returns with its
	// endpoint written, isolated as its policy says.
	go func() {
		time.Sleep(50 * time.Millisecond)
		p := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web"})
		p.IPs = nil
		r.OnPod(types.NamespacedName{Namespace: "x", Name: "web"}, p)
	}()
	if err := r.AdmitPod(ctx, web, "sandbox-1", addr); err != nil {
		t.Fatalf("ADD of a pod the cache holds: %v", err)
	}
	if ep, ok := endpointOf(t, fake, "10.244.1.5"); !ok || ep.Flags != datapath.IsolatedIngress || rulesOf(t, fake, ep.RuleSet) != 1 {
		t.Fatalf("when ADD returned, the pod's endpoint %+v (found %v): want isolated for ingress, with client's rule", ep, ok)
	}
	// A status update of the API without the address keeps it.
	p := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web", "v": "2"})
	p.IPs = nil
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "web"}, p)
	time.Sleep(50 * time.Millisecond)
	if _, ok := endpointOf(t, fake, "10.244.1.5"); !ok {
		t.Fatal("an update of the Pod without its address opened it")
	}

	// Another node's pod is refused.
	other := pod("x", "other", "node2", "10.244.2.5", map[string]string{"app": "web"})
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "other"}, other)
	if err := r.AdmitPod(ctx, other.ID, "sandbox-2", addr); err == nil || !strings.Contains(err.Error(), "not this node") {
		t.Fatalf("ADD of another node's pod: %v", err)
	}

	// The identity map is full (client, web, other, the node): a new
	// pod's ADD fails, and its address is quarantined, not open. other's
	// identity is written by the reconciler's pass, not by its refused
	// ADD, so wait for it: without it the map has room for late.
	eventually(t, "the other node's pod in the identity map", func() bool { return fake.Len(policy.MapHosts) == 4 })
	late := pod("x", "late", "node1", "10.244.1.9", map[string]string{"app": "web"})
	late.IPs = nil
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "late"}, late)
	err := r.AdmitPod(ctx, late.ID, "sandbox-3", []netip.Addr{netip.MustParseAddr("10.244.1.9")})
	if err == nil || !strings.Contains(err.Error(), "map pol_hosts is full") {
		t.Fatalf("ADD with the identity map full: %v", err)
	}
	if ep, ok := endpointOf(t, fake, "10.244.1.9"); !ok || !quarantined(t, fake, ep) {
		t.Fatalf("the refused pod's endpoint %+v (found %v): want quarantined", ep, ok)
	}
	// Its DEL forgets the address: nothing of it stays.
	r.ForgetPod("sandbox-3")
	eventually(t, "the refused pod's endpoint gone after its DEL", func() bool {
		_, ok := endpointOf(t, fake, "10.244.1.9")
		return !ok
	})
}
