package cni_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cni/cnisocket"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

var _ cnisocket.PodPolicy = (*policy.Reconciler)(nil)

// TestAddWaitsForPolicy: the real plugin, through the runtime's library,
// against the agent's socket gated by the real policy reconciler (its
// maps in memory): ADD is refused until the first NetworkPolicy sync is
// written (a rebooted node would start every pod open), and once it is,
// ADD returns only with the pod's endpoint written at the addresses it
// was given, though the API's Pod has none yet. An ADD naming no pod, or
// one the cache does not hold, is refused, and leaves nothing.
func TestAddWaitsForPolicy(t *testing.T) {
	defer func(d time.Duration) { policy.AdmitTimeout = d }(policy.AdmitTimeout)
	policy.AdmitTimeout = time.Second
	fake := cubetest.New(t, nil, policy.Cube{})
	r := policy.NewReconciler(fake.Maps, "node1", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	e := newEnv(t)
	e.stopAgent()
	e.wrap = func(h cnisocket.AgentHandler) cnisocket.AgentHandler { return cnisocket.WithPolicy(h, r) }
	e.startAgent()
	e.k8sPod = "x/web"
	ns := e.pod("a")
	endpoint := func(ip string) (datapath.PolicyEndpoint, bool) {
		v, ok, err := cube.Get[datapath.Addr, datapath.PolicyEndpoint](fake.Maps, policy.MapEndpoints, datapath.AddrFrom(netip.MustParseAddr(ip)))
		if err != nil {
			t.Fatal(err)
		}
		return v, ok
	}

	// The cluster as listed so far: the pod (bound, no address yet) and
	// a policy isolating it; the lists are not complete.
	web := &model.Pod{ID: model.PodID{Namespace: "x", Name: "web"}, Node: "node1", Labels: map[string]string{"app": "web"}}
	r.OnPod(k8stypes.NamespacedName{Namespace: "x", Name: "web"}, web)
	r.OnNamespace("x", &model.Namespace{Name: "x"})
	sel, _ := labels.Parse("app=web")
	r.OnPolicy(k8stypes.NamespacedName{Namespace: "x", Name: "deny"}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "deny"},
		Pods: sel, IsolatesIngress: true})

	// DEL is served (positive control: the socket answers), ADD is not.
	if _, err := e.runtime("del", ns); err != nil {
		t.Fatalf("DEL before the first policy sync: %v", err)
	}
	_, err := e.runtime("add", ns)
	wantCode(t, err, types.ErrTryAgainLater, "agent has not finished its first policy sync")
	if l, a := e.hostLinks(), e.allocations(); len(l) != 0 || len(a) != 0 {
		t.Fatalf("a refused ADD left veths %v, allocations %v", l, a)
	}

	r.OnPoliciesSynced()
	<-r.PolicySynced()
	if _, err := e.runtime("add", ns); err != nil {
		t.Fatalf("ADD after the first policy sync: %v", err)
	}
	for _, ip := range []string{"10.244.7.1", "fd00:10:244:7::1"} {
		if ep, ok := endpoint(ip); !ok || ep.Flags != datapath.IsolatedIngress {
			t.Errorf("when ADD returned, %s's endpoint is %+v (found %v): want isolated for ingress", ip, ep, ok)
		}
	}
	if _, err := e.runtime("del", ns); err != nil {
		t.Fatal(err)
	}
	// The API's Pod has no address: after DEL none is the pod's.
	testenv.WaitFor(t, 2*time.Second, "the pod's endpoint gone after its DEL", func() bool {
		_, ok := endpoint("10.244.7.1")
		return !ok
	})

	for _, c := range []struct{ pod, says string }{
		{"", "names no pod"},
		{"x/unknown", "not in the agent's cache"},
	} {
		e.k8sPod = c.pod
		_, err := e.runtime("add", ns)
		wantCode(t, err, types.ErrTryAgainLater, c.says)
		if l, a := e.hostLinks(), e.allocations(); len(l) != 0 || len(a) != 0 {
			t.Fatalf("ADD of %q: refused, and left veths %v, allocations %v", c.pod, l, a)
		}
	}
}
