package lb

import (
	"net/netip"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/internal/apiobj"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
)

// fakeElector elects this node for the addresses in mine, and records
// what it was asked.
type fakeElector struct {
	mu    sync.Mutex
	mine  map[netip.Addr]bool
	asked []electorQuestion
}

type electorQuestion struct {
	ip         netip.Addr
	everyNode  bool
	candidates []string
}

func (e *fakeElector) Elected(ip netip.Addr, everyNode bool, withEndpoints []string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := slices.Clone(withEndpoints)
	slices.Sort(c)
	e.asked = append(e.asked, electorQuestion{ip, everyNode, c})
	return e.mine[ip]
}

func (e *fakeElector) set(ips ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mine = map[netip.Addr]bool{}
	for _, ip := range ips {
		e.mine[netip.MustParseAddr(ip)] = true
	}
	e.asked = nil
}

func lbService(policy corev1.ServiceExternalTrafficPolicy) *model.Service {
	svc := apiobj.Service([]string{"10.96.0.1", "fd00::1"},
		corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "https", Port: 443, NodePort: 30443, Protocol: corev1.ProtocolTCP})
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = policy
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}, {IP: "198.51.100.8"}, {IP: "2001:db8::7"}}
	return apiobj.Must(k8s.ToService(svc))
}

// announced lists the frontends flagged Announce.
func announced(fbs model.Frontends) []model.Frontend {
	var out []model.Frontend
	for _, f := range fbs {
		if f.Flags&model.Announce != 0 {
			out = append(out, f.Frontend)
		}
	}
	return out
}

// TestElectedFrontends: with an elector, a LoadBalancer IP's frontends
// are flagged Announce only where it elects this node, asked with every
// node eligible for Cluster, and for Local with the nodes holding a ready
// endpoint of the address's family (a serving terminating one when none
// is ready), and only on a node with a local endpoint; without one, on
// every eligible node as before.
func TestElectedFrontends(t *testing.T) {
	http := []discoveryv1.EndpointPort{
		{Name: apiobj.Ptr("http"), Port: apiobj.Ptr[int32](8080), Protocol: apiobj.Ptr(corev1.ProtocolTCP)},
		{Name: apiobj.Ptr("https"), Port: apiobj.Ptr[int32](8443), Protocol: apiobj.Ptr(corev1.ProtocolTCP)},
	}
	slices4 := func(eps ...apiobj.EP) *model.EndpointSlice {
		return apiobj.Must(k8s.ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv4, http, eps...)))
	}
	eps := []*model.EndpointSlice{
		slices4(apiobj.EP{Addr: "10.0.0.1", Node: "node1"}, apiobj.EP{Addr: "10.0.0.2", Node: "node2"},
			apiobj.EP{Addr: "10.0.0.3", Node: "node3", Ready: apiobj.Ptr(false)}),
		slices4(apiobj.EP{Addr: "10.0.0.4", Node: "node4"}, apiobj.EP{Addr: "10.0.0.5", Node: "node1"}),
		apiobj.Must(k8s.ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv6, http, apiobj.EP{Addr: "fd00:10::1", Node: "node2"}))),
	}
	terminating := []*model.EndpointSlice{slices4(
		apiobj.EP{Addr: "10.0.0.1", Node: "node1", Ready: apiobj.Ptr(false), Serving: apiobj.Ptr(true), Terminating: apiobj.Ptr(true)},
		apiobj.EP{Addr: "10.0.0.2", Node: "node2", Ready: apiobj.Ptr(false), Serving: apiobj.Ptr(false), Terminating: apiobj.Ptr(true)})}
	node := model.Node{Name: "node1", Addrs: []netip.Addr{netip.MustParseAddr("172.30.0.1")}}
	a7, a8, v6 := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("198.51.100.8"), netip.MustParseAddr("2001:db8::7")
	lb := func(ip netip.Addr, port uint16) model.Frontend {
		return model.Frontend{Addr: ip, Port: port, Proto: model.TCP}
	}
	for _, c := range []struct {
		name   string
		policy corev1.ServiceExternalTrafficPolicy
		slices []*model.EndpointSlice
		mine   []string
		want   []model.Frontend
		asked  []electorQuestion // each address once (the elector is asked per port)
	}{
		{name: "Cluster, elected for one address", policy: corev1.ServiceExternalTrafficPolicyCluster, slices: eps, mine: []string{"198.51.100.8"},
			want:  []model.Frontend{lb(a8, 80), lb(a8, 443)},
			asked: []electorQuestion{{a7, true, nil}, {a8, true, nil}, {v6, true, nil}}},
		{name: "Cluster, elected for none", policy: corev1.ServiceExternalTrafficPolicyCluster, slices: eps,
			asked: []electorQuestion{{a7, true, nil}, {a8, true, nil}, {v6, true, nil}}},
		{name: "Local: the nodes with a ready endpoint (not node3's unready one); IPv6 not asked, no local endpoint",
			policy: corev1.ServiceExternalTrafficPolicyLocal, slices: eps, mine: []string{"198.51.100.7", "2001:db8::7"},
			want:  []model.Frontend{lb(a7, 80), lb(a7, 443)},
			asked: []electorQuestion{{a7, false, []string{"node1", "node2", "node4"}}, {a8, false, []string{"node1", "node2", "node4"}}}},
		{name: "Local, no ready endpoint anywhere: the nodes with a serving terminating one", policy: corev1.ServiceExternalTrafficPolicyLocal,
			slices: terminating, mine: []string{"198.51.100.7"}, want: []model.Frontend{lb(a7, 80), lb(a7, 443)},
			asked: []electorQuestion{{a7, false, []string{"node1"}}, {a8, false, []string{"node1"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc := lbService(c.policy)
			el := &fakeElector{}
			el.set(c.mine...)
			got := ElectedFrontends(svc, c.slices, node, el)
			if a := announced(got); !slices.Equal(a, c.want) {
				t.Errorf("announced %v, want %v", a, c.want)
			}
			var asked []electorQuestion
			for _, q := range el.asked {
				if !slices.ContainsFunc(asked, func(o electorQuestion) bool { return o.ip == q.ip }) {
					asked = append(asked, q)
				}
			}
			if !slices.EqualFunc(asked, c.asked, func(a, b electorQuestion) bool {
				return a.ip == b.ip && a.everyNode == b.everyNode && slices.Equal(a.candidates, b.candidates)
			}) {
				t.Errorf("asked %+v, want %+v", asked, c.asked)
			}
			// Apart from Announce, the frontends are Frontends'.
			plain := Frontends(svc, c.slices, node)
			if len(plain) != len(got) {
				t.Fatalf("%d frontends, Frontends has %d", len(got), len(plain))
			}
			for i := range got {
				if got[i].Frontend != plain[i].Frontend || got[i].Flags&^model.Announce != plain[i].Flags&^model.Announce ||
					!slices.Equal(got[i].Backends, plain[i].Backends) {
					t.Errorf("%v differs from Frontends' %v", got[i], plain[i])
				}
				if got[i].Flags&model.Announce != 0 && plain[i].Flags&model.Announce == 0 {
					t.Errorf("%v announced where Frontends does not", got[i].Frontend)
				}
			}
			if nilEl := ElectedFrontends(svc, c.slices, node, nil); !slices.EqualFunc(nilEl, plain, func(a, b model.FrontendBackends) bool {
				return a.Frontend == b.Frontend && a.Flags == b.Flags
			}) {
				t.Errorf("no elector: %v, Frontends %v", nilEl, plain)
			}
		})
	}
}

// TestReconcilerFollowsElector: lb_announce holds a LoadBalancer IP only
// while the elector elects this node, after ResyncLoadBalancers, which
// resyncs the Services with LoadBalancer IPs and no other.
func TestReconcilerFollowsElector(t *testing.T) {
	maps := newMaps(t, nil)
	tables := New(maps)
	if err := tables.SetUplinks([]Uplink{{Ifindex: 2, MAC: [6]byte{2, 0, 0, 0, 0, 2}}}); err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(tables, nil)
	r.SetNode(model.Node{Name: "node1", Addrs: []netip.Addr{netip.MustParseAddr("172.30.0.1")}})
	el := &fakeElector{}
	el.set() // elected for nothing
	r.SetElector(el)
	r.OnService(types.NamespacedName{Namespace: "default", Name: "lb"}, lbService(corev1.ServiceExternalTrafficPolicyCluster))
	r.OnService(svcKey(1), svc(1))
	r.OnSynced()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	// The initial sync is computed without the elector (initial_sync.go):
	// the agent resyncs once it is applied.
	r.ResyncLoadBalancers()
	if n := r.Pending(); n != 1 {
		t.Errorf("%d Services queued by ResyncLoadBalancers, want the LoadBalancer one", n)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := announcedIn(t, maps); len(got) != 0 {
		t.Errorf("elected for nothing: lb_announce %q", got)
	}
	el.set("198.51.100.7", "2001:db8::7")
	r.ResyncLoadBalancers()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := announcedIn(t, maps), []string{"2 198.51.100.7 020000000002", "2 2001:db8::7 020000000002"}; !slices.Equal(got, want) {
		t.Errorf("elected for two: lb_announce %q, want %q", got, want)
	}
	el.set("198.51.100.8")
	r.ResyncLoadBalancers()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := announcedIn(t, maps), []string{"2 198.51.100.8 020000000002"}; !slices.Equal(got, want) {
		t.Errorf("the election moved: lb_announce %q, want %q", got, want)
	}
	r.SetElector(nil)
	r.ResyncLoadBalancers()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := announcedIn(t, maps); len(got) != 3 {
		t.Errorf("no elector: lb_announce %q, want every LoadBalancer IP", got)
	}
}

// fakeAdvertiser records the last Advertised of each Service.
type fakeAdvertiser struct {
	mu  sync.Mutex
	got map[model.ServiceID]Advertised
}

func (f *fakeAdvertiser) SetService(id model.ServiceID, a Advertised) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.got == nil {
		f.got = map[model.ServiceID]Advertised{}
	}
	f.got[id] = a
}

func (f *fakeAdvertiser) DeleteService(id model.ServiceID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.got, id)
}

func (f *fakeAdvertiser) lbIPs(id model.ServiceID) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ip := range f.got[id].LoadBalancerIPs {
		out = append(out, ip.String())
	}
	return out
}

// TestAffinityServiceAdvertisedByTheElectedNode: what BGP may announce of
// a Service with ClientIP affinity is the LoadBalancer IPs the elector
// gives this node (a router spreading one client's connections over
// several nodes would break the per-node affinity), and it follows the
// election; a Service without affinity is announced by every node (ECMP)
// whatever the elector says.
func TestAffinityServiceAdvertisedByTheElectedNode(t *testing.T) {
	r := NewReconciler(New(newMaps(t, nil)), nil)
	r.SetNode(model.Node{Name: "node1", Addrs: []netip.Addr{netip.MustParseAddr("172.30.0.1")}})
	el := &fakeElector{}
	el.set("198.51.100.8")
	r.SetElector(el)
	adv := &fakeAdvertiser{}
	r.SetAdvertiser(adv)
	sticky := lbService(corev1.ServiceExternalTrafficPolicyCluster)
	sticky.Affinity = 10800
	stickyID, plainID := model.ServiceID{Namespace: "default", Name: "sticky"}, model.ServiceID{Namespace: "default", Name: "plain"}
	r.OnService(types.NamespacedName(stickyID), sticky)
	r.OnService(types.NamespacedName(plainID), lbService(corev1.ServiceExternalTrafficPolicyCluster))
	r.OnSynced()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	all := []string{"198.51.100.7", "198.51.100.8", "2001:db8::7"}
	if got := adv.lbIPs(plainID); !slices.Equal(got, all) {
		t.Errorf("without affinity: advertised %q, want every address %q", got, all)
	}
	if got, want := adv.lbIPs(stickyID), []string{"198.51.100.8"}; !slices.Equal(got, want) {
		t.Errorf("with affinity: advertised %q, want the elected %q", got, want)
	}
	el.set("198.51.100.7", "2001:db8::7")
	r.ResyncLoadBalancers()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := adv.lbIPs(stickyID), []string{"198.51.100.7", "2001:db8::7"}; !slices.Equal(got, want) {
		t.Errorf("the election moved: advertised %q, want %q", got, want)
	}
	if got := adv.lbIPs(plainID); !slices.Equal(got, all) {
		t.Errorf("without affinity, after the election moved: advertised %q, want %q", got, all)
	}
}
