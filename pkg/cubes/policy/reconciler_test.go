package policy_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

func pod(ns, name, node, ip string, l map[string]string) *model.Pod {
	return &model.Pod{ID: model.PodID{Namespace: ns, Name: name}, Labels: l, Node: node, IPs: []netip.Addr{netip.MustParseAddr(ip)}}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestReconciler: nothing is written before the sources have delivered
// their initial lists; then only this node's selected pods become
// endpoints; a label change rewrites only what it changes; a failed write
// is retried until the maps converge.
func TestReconciler(t *testing.T) {
	fake := cubetest.New(t, nil, policy.Cube{})
	web := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web"})
	other := pod("x", "other", "node2", "10.244.2.5", map[string]string{"app": "web"})
	client := pod("x", "client", "node1", "10.244.1.6", map[string]string{"app": "client"})
	r := startWebPolicy(t, fake, web, other, client)
	if n := fake.Len(policy.MapEndpoints) + fake.Len(policy.MapRules) + fake.Len(policy.MapHosts); n != 0 {
		t.Fatalf("%d entries written before the initial lists were complete", n)
	}

	r.OnPoliciesSynced()
	eventually(t, "the policy written", func() bool { return fake.Len(policy.MapRules) == 1 })
	if n := fake.Len(policy.MapEndpoints); n != 1 {
		t.Errorf("%d endpoints, want 1: web on this node (other is on node2, client is selected by nothing)", n)
	}
	if n := fake.Len(policy.MapHosts); n != 4 {
		t.Errorf("%d identity cache entries, want 4 (3 pods and this node)", n)
	}

	// A label change of an unrelated pod writes nothing but its identity,
	// and the rules' revision (a connection's verdict may depend on an
	// address's identity: judged again on its next packet).
	var writes atomic.Int32
	fake.FailWhen(func(op cubetest.Op) error {
		writes.Add(1)
		return nil
	})
	bystander := pod("x", "bystander", "node2", "10.244.2.9", map[string]string{"app": "db"})
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "bystander"}, bystander)
	eventually(t, "the bystander's identity", func() bool { return fake.Len(policy.MapHosts) == 5 })
	time.Sleep(50 * time.Millisecond)
	if n := writes.Load(); n != 2 {
		t.Errorf("a pod no policy names: %d map writes, want 2 (its identity, the revision)", n)
	}

	// Writes fail for a while: the reconciler retries and converges. The
	// bystander takes the client's labels: its identity becomes the
	// client's (one identity, one entry, serve both).
	identity := func(ip string) datapath.Identity {
		v, ok, err := cube.Get[datapath.Addr, datapath.PolicyPeer](fake.Maps, policy.MapHosts,
			datapath.AddrFrom(netip.MustParseAddr(ip)))
		if err != nil || !ok {
			t.Fatalf("identity of %s: %v %v", ip, ok, err)
		}
		return v.Identity
	}
	if identity("10.244.2.9") == identity("10.244.1.6") {
		t.Fatal("db and client pods share an identity")
	}
	fail := atomic.Bool{}
	fail.Store(true)
	fake.FailWhen(func(op cubetest.Op) error {
		if fail.Load() && op.Map == policy.MapHosts {
			return errors.New("injected")
		}
		return nil
	})
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "bystander"},
		pod("x", "bystander", "node2", "10.244.2.9", map[string]string{"app": "client"}))
	time.Sleep(100 * time.Millisecond)
	if identity("10.244.2.9") == identity("10.244.1.6") {
		t.Fatal("written while writes fail")
	}
	fail.Store(false)
	eventually(t, "the bystander's new identity once writes succeed", func() bool {
		return identity("10.244.2.9") == identity("10.244.1.6")
	})
	if n := fake.Len(policy.MapRules); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
	r.OnPolicy(types.NamespacedName{Namespace: "x", Name: "web"}, nil)
	eventually(t, "the policy removed", func() bool {
		return fake.Len(policy.MapRules) == 0 && fake.Len(policy.MapEndpoints) == 0
	})
}

// reports collects what is reported, by object and reason.
type reports struct {
	mu   sync.Mutex
	msgs map[string]string
}

func (r *reports) Warn(obj report.Object, reason report.Reason, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs[obj.String()+" "+string(reason)] = msg
}

func (r *reports) get(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs[key]
}

// TestUnmatchedNamedPortReported: a policy naming a port no pod it
// applies to has is reported on the policy (an Event, a metric), and the
// report is cleared once a pod with that port comes.
func TestUnmatchedNamedPortReported(t *testing.T) {
	fake := cubetest.New(t, nil, policy.Cube{})
	r := policy.NewReconciler(fake.Maps, "node1", nil)
	rep := &reports{msgs: map[string]string{}}
	rr := &report.Reporter{Sink: rep}
	r.SetReporter(rr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	web := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web"})
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "web"}, web)
	r.OnNamespace("x", &model.Namespace{Name: "x"})
	sel, _ := labels.Parse("app=web")
	r.OnPolicy(types.NamespacedName{Namespace: "x", Name: "web"}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "web"},
		Pods: sel, IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Ports: []model.PolicyPort{{Proto: model.TCP, Name: "metrics"}}}}})
	r.OnPoliciesSynced()
	key := "NetworkPolicy x/web " + string(report.UnmatchedPort)
	eventually(t, "the unmatched port reported", func() bool { return strings.Contains(rep.get(key), `ingress port "metrics"`) })
	if rr.Count()[report.UnmatchedPort] != 1 {
		t.Errorf("counted %v", rr.Count())
	}
	web2 := *web
	web2.Ports = []model.NamedPort{{Name: "metrics", Port: 9090, Proto: model.TCP}}
	r.OnPod(types.NamespacedName{Namespace: "x", Name: "web"}, &web2)
	eventually(t, "the report cleared", func() bool { return rr.Count()[report.UnmatchedPort] == 0 })
}

// TestReconcilerSweepsWhatAnEarlierAgentLeft: the maps an earlier agent
// pinned hold an endpoint, its rules and an identity of a pod deleted
// while no agent ran. They are enforced until this agent's first pass
// (its lists complete), which writes the cluster's and then deletes them,
// so the address and numbers, given again, are not judged by that pod's
// rules.
func TestReconcilerSweepsWhatAnEarlierAgentLeft(t *testing.T) {
	fake := cubetest.New(t, nil, policy.Cube{})
	gone := netip.MustParseAddr("10.244.1.99")
	goneEntry := policy.Entry{RuleSet: 1 << 31, Dir: policy.Ingress, Proto: model.TCP, Peer: 300, Port: 9999, PortBits: 16}
	left := &policy.Tables{
		Peers:     map[netip.Prefix]policy.Identity{netip.PrefixFrom(gone, 32): 300},
		Endpoints: map[netip.Addr]policy.Endpoint{gone: {ID: 50, RuleSet: 1 << 31, IsolatedIngress: true}},
		Entries:   map[policy.Entry]struct{}{goneEntry: {}},
	}
	if err := policy.Sync(fake.Maps, nil, left); err != nil {
		t.Fatal(err)
	}
	web := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web"})
	client := pod("x", "client", "node1", "10.244.1.6", map[string]string{"app": "client"})
	r := startWebPolicy(t, fake, web, client)
	if n := fake.Len(policy.MapEndpoints) + fake.Len(policy.MapRules) + fake.Len(policy.MapHosts); n != 3 {
		t.Fatalf("before the lists are complete the maps hold %d keys, want the 3 the earlier agent left", n)
	}

	r.OnPoliciesSynced()
	eventually(t, "the cluster's policy written and what was left deleted", func() bool {
		return fake.Len(policy.MapEndpoints) == 1 && fake.Len(policy.MapRules) == 1 && fake.Len(policy.MapHosts) == 3
	})
	ep, ok, err := cube.Get[datapath.Addr, datapath.PolicyEndpoint](fake.Maps, policy.MapEndpoints, datapath.AddrFrom(web.IPs[0]))
	if err != nil || !ok {
		t.Fatalf("web's endpoint: found %v, err %v", ok, err)
	}
	if _, ok, err := cube.Get[datapath.Addr, datapath.PolicyEndpoint](fake.Maps, policy.MapEndpoints, datapath.AddrFrom(gone)); err != nil || ok {
		t.Errorf("the deleted pod's endpoint: found %v, err %v; want it gone", ok, err)
	}
	// Numbered above what was left: no number meant two things at once.
	if ep.Id <= 50 || ep.RuleSet <= 1<<31 {
		t.Errorf("web's endpoint %d, rule set %#x: want above the left ones (50, %#x)", ep.Id, ep.RuleSet, uint32(1<<31))
	}
	err = cube.Each(fake.Maps, policy.MapHosts, func(_ datapath.Addr, v datapath.PolicyPeer) bool {
		if id := policy.Identity(v.Identity); id != policy.Host && id <= 300 {
			t.Errorf("identity %d handed out: want above the left one (300)", id)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}

// startWebPolicy runs a reconciler of node1 on fake's maps, given pods, the
// namespace x and the policy x/web (app=web receives TCP 80 from
// app=client), and waits a moment: its initial lists are not complete
// (OnPoliciesSynced) until the test says so.
func startWebPolicy(t *testing.T, fake *cubetest.Fake, pods ...*model.Pod) *policy.Reconciler {
	t.Helper()
	r := policy.NewReconciler(fake.Maps, "node1", []netip.Addr{netip.MustParseAddr("172.30.0.11")})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go r.Run(ctx)
	for _, p := range pods {
		r.OnPod(types.NamespacedName{Namespace: p.ID.Namespace, Name: p.ID.Name}, p)
	}
	r.OnNamespace("x", &model.Namespace{Name: "x"})
	sel, _ := labels.Parse("app=web")
	peer, _ := labels.Parse("app=client")
	r.OnPolicy(types.NamespacedName{Namespace: "x", Name: "web"}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "web"},
		Pods: sel, IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: peer}}, Ports: []model.PolicyPort{{Proto: model.TCP, Port: 80}}}}})
	time.Sleep(50 * time.Millisecond)
	return r
}
