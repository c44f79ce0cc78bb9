package lb

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/internal/apiobj"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
)

// fes is a Service's expected frontends and their backends.
type fes map[model.Frontend][]model.Backend

func fe(addr string, port uint16, p model.Proto) model.Frontend {
	return model.Frontend{Addr: netip.MustParseAddr(addr), Port: port, Proto: p}
}

func be(addrPort string) model.Backend {
	ap := netip.MustParseAddrPort(addrPort)
	return model.Backend{Addr: ap.Addr(), Port: ap.Port()}
}

func TestFrontends(t *testing.T) {
	http := corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")}
	dns := corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}
	slicePorts := []discoveryv1.EndpointPort{
		{Name: apiobj.Ptr("http"), Port: apiobj.Ptr[int32](8080), Protocol: apiobj.Ptr(corev1.ProtocolTCP)},
		{Name: apiobj.Ptr("dns"), Port: apiobj.Ptr[int32](5353), Protocol: apiobj.Ptr(corev1.ProtocolUDP)},
	}
	cases := []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		want   fes
	}{
		{
			name:   "multi-port: each port's backends use the slice port of the same name",
			svc:    apiobj.Service([]string{"10.96.0.1"}, http, dns),
			slices: []*discoveryv1.EndpointSlice{apiobj.Slice(discoveryv1.AddressTypeIPv4, slicePorts, apiobj.EP{Addr: "10.0.0.1"})},
			want: fes{
				fe("10.96.0.1", 80, model.TCP): {be("10.0.0.1:8080")},
				fe("10.96.0.1", 53, model.UDP): {be("10.0.0.1:5353")},
			},
		},
		{
			name: "dual stack: each ClusterIP gets the endpoints of its own family",
			svc:  apiobj.Service([]string{"10.96.0.1", "fd00::1"}, http),
			slices: []*discoveryv1.EndpointSlice{
				apiobj.Slice(discoveryv1.AddressTypeIPv4, slicePorts, apiobj.EP{Addr: "10.0.0.1"}),
				apiobj.Slice(discoveryv1.AddressTypeIPv6, slicePorts, apiobj.EP{Addr: "fd00:1::1"}),
			},
			want: fes{
				fe("10.96.0.1", 80, model.TCP): {be("10.0.0.1:8080")},
				fe("fd00::1", 80, model.TCP):   {be("[fd00:1::1]:8080")},
			},
		},
		{
			name: "not-ready endpoints get nothing; unset readiness counts as ready",
			svc:  apiobj.Service([]string{"10.96.0.1"}, http),
			slices: []*discoveryv1.EndpointSlice{apiobj.Slice(discoveryv1.AddressTypeIPv4, slicePorts,
				apiobj.EP{Addr: "10.0.0.1", Ready: apiobj.Ptr(false)}, apiobj.EP{Addr: "10.0.0.2", Ready: apiobj.Ptr(true)}, apiobj.EP{Addr: "10.0.0.3"})},
			want: fes{fe("10.96.0.1", 80, model.TCP): {be("10.0.0.2:8080"), be("10.0.0.3:8080")}},
		},
		{
			name: "terminating endpoints are not used while a ready one exists",
			svc:  apiobj.Service([]string{"10.96.0.1"}, http),
			slices: []*discoveryv1.EndpointSlice{apiobj.Slice(discoveryv1.AddressTypeIPv4, slicePorts,
				apiobj.EP{Addr: "10.0.0.1", Ready: apiobj.Ptr(false), Serving: apiobj.Ptr(true), Terminating: apiobj.Ptr(true)},
				apiobj.EP{Addr: "10.0.0.2", Ready: apiobj.Ptr(true)})},
			want: fes{fe("10.96.0.1", 80, model.TCP): {be("10.0.0.2:8080")}},
		},
		{
			name: "no ready endpoint: the serving terminating ones take traffic (not the non-serving)",
			svc:  apiobj.Service([]string{"10.96.0.1"}, http),
			slices: []*discoveryv1.EndpointSlice{apiobj.Slice(discoveryv1.AddressTypeIPv4, slicePorts,
				apiobj.EP{Addr: "10.0.0.1", Ready: apiobj.Ptr(false), Serving: apiobj.Ptr(true), Terminating: apiobj.Ptr(true)},
				apiobj.EP{Addr: "10.0.0.2", Ready: apiobj.Ptr(false), Serving: apiobj.Ptr(false), Terminating: apiobj.Ptr(true)},
				apiobj.EP{Addr: "10.0.0.3", Ready: apiobj.Ptr(false)})},
			want: fes{fe("10.96.0.1", 80, model.TCP): {be("10.0.0.1:8080")}},
		},
		{
			name:   "no endpoints: the frontend exists, with no backends (it rejects)",
			svc:    apiobj.Service([]string{"10.96.0.1"}, http),
			slices: nil,
			want:   fes{fe("10.96.0.1", 80, model.TCP): nil},
		},
		{
			name: "endpoints from several slices are merged, duplicates once",
			svc:  apiobj.Service([]string{"10.96.0.1"}, http),
			slices: []*discoveryv1.EndpointSlice{
				apiobj.Slice(discoveryv1.AddressTypeIPv4, slicePorts, apiobj.EP{Addr: "10.0.0.1"}),
				apiobj.Slice(discoveryv1.AddressTypeIPv4, slicePorts, apiobj.EP{Addr: "10.0.0.2"}, apiobj.EP{Addr: "10.0.0.1"}),
			},
			want: fes{fe("10.96.0.1", 80, model.TCP): {be("10.0.0.1:8080"), be("10.0.0.2:8080")}},
		},
		{
			name: "headless Service: nothing to program",
			svc:  apiobj.Service([]string{"None"}, http),
			want: fes{},
		},
		{
			name: "ExternalName Service: nothing to program",
			svc: func() *corev1.Service {
				s := apiobj.Service([]string{"10.96.0.1"}, http)
				s.Spec.Type = corev1.ServiceTypeExternalName
				return s
			}(),
			want: fes{},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in []*model.EndpointSlice
			for _, s := range c.slices {
				in = append(in, apiobj.Must(k8s.ToEndpointSlice(s)))
			}
			got := Frontends(apiobj.Must(k8s.ToService(c.svc)), in, model.Node{})
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for f, bs := range c.want {
				g, ok := got.Find(f)
				if !ok || !slices.Equal(g, bs) {
					t.Errorf("%s: got %v, want %v", f, g, bs)
				}
			}
		})
	}
}

// TestExternalFrontends: a LoadBalancer Service with ExternalIPs is also
// served on this node's addresses at its NodePort, on its external IPs and
// on its load-balancer IPs, each in its own family, flagged External; with
// externalTrafficPolicy Local only this node's endpoints back them.
func TestExternalFrontends(t *testing.T) {
	svc := apiobj.Service([]string{"10.96.0.1", "fd00::1"},
		corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080, Protocol: corev1.ProtocolTCP})
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalIPs = []string{"192.0.2.10"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}, {IP: "2001:db8::7"}, {Hostname: "lb.example"}}
	ports := []discoveryv1.EndpointPort{{Name: apiobj.Ptr("http"), Port: apiobj.Ptr[int32](8080), Protocol: apiobj.Ptr(corev1.ProtocolTCP)}}
	eps := []*model.EndpointSlice{
		apiobj.Must(k8s.ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv4, ports, apiobj.EP{Addr: "10.0.0.1", Node: "node1"}, apiobj.EP{Addr: "10.0.0.2", Node: "node2"}))),
		apiobj.Must(k8s.ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv6, ports, apiobj.EP{Addr: "fd00:10::1", Node: "node2"}))),
	}
	node := model.Node{Name: "node1", Addrs: []netip.Addr{netip.MustParseAddr("172.30.0.1"), netip.MustParseAddr("fd00:172:30::1")}}
	all4 := []model.Backend{be("10.0.0.1:8080"), be("10.0.0.2:8080")}
	all6 := []model.Backend{be("[fd00:10::1]:8080")}
	local4 := []model.Backend{be("10.0.0.1:8080")}

	type want struct {
		flags    model.FrontendFlags
		backends []model.Backend
	}
	ext, loc := model.External, model.External|model.Local
	// A LoadBalancer IP is announced (answered ARP/NDP for) where the node
	// serves it: always with Cluster; with Local, only with a local
	// endpoint (the ExternalIP, routed by the admin, never).
	extAnn, locAnn := ext|model.Announce, loc|model.Announce
	loc2 := loc | model.TwoScopes
	in := func(f model.Frontend) model.Frontend { f.Internal = true; return f }
	for _, c := range []struct {
		name   string
		policy corev1.ServiceExternalTrafficPolicy
		want   map[model.Frontend]want
	}{
		{"externalTrafficPolicy Cluster", corev1.ServiceExternalTrafficPolicyCluster, map[model.Frontend]want{
			fe("10.96.0.1", 80, model.TCP):         {0, all4},
			fe("fd00::1", 80, model.TCP):           {0, all6},
			fe("172.30.0.1", 30080, model.TCP):     {ext, all4},
			fe("192.0.2.10", 80, model.TCP):        {ext, all4},
			fe("198.51.100.7", 80, model.TCP):      {extAnn, all4},
			fe("fd00:172:30::1", 30080, model.TCP): {ext, all6},
			fe("2001:db8::7", 80, model.TCP):       {extAnn, all6},
		}},
		{"externalTrafficPolicy Local: this node's endpoints only, none for v6 (whose LoadBalancer IP it does not announce)", corev1.ServiceExternalTrafficPolicyLocal, map[model.Frontend]want{
			fe("10.96.0.1", 80, model.TCP):         {0, all4},
			fe("fd00::1", 80, model.TCP):           {0, all6},
			fe("172.30.0.1", 30080, model.TCP):     {loc2, local4},
			fe("192.0.2.10", 80, model.TCP):        {loc2, local4},
			fe("198.51.100.7", 80, model.TCP):      {locAnn | model.TwoScopes, local4},
			fe("fd00:172:30::1", 30080, model.TCP): {loc2, nil},
			fe("2001:db8::7", 80, model.TCP):       {loc2, nil},
			// Clients inside the cluster reach every endpoint (kube-proxy's
			// short-circuit), through each one's in-cluster twin.
			in(fe("172.30.0.1", 30080, model.TCP)):     {ext, all4},
			in(fe("192.0.2.10", 80, model.TCP)):        {ext, all4},
			in(fe("198.51.100.7", 80, model.TCP)):      {ext, all4},
			in(fe("fd00:172:30::1", 30080, model.TCP)): {ext, all6},
			in(fe("2001:db8::7", 80, model.TCP)):       {ext, all6},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc.Spec.ExternalTrafficPolicy = c.policy
			got := Frontends(apiobj.Must(k8s.ToService(svc)), eps, node)
			if len(got) != len(c.want) {
				t.Fatalf("got %d frontends %v, want %d", len(got), got, len(c.want))
			}
			for _, g := range got {
				w, ok := c.want[g.Frontend]
				if !ok || g.Flags != w.flags || !slices.Equal(g.Backends, w.backends) {
					t.Errorf("%s: flags %d backends %v; want %+v (listed: %v)", g.Frontend, g.Flags, g.Backends, w, ok)
				}
			}
		})
	}

	// A ClusterIP Service with an external IP has no NodePort frontends.
	plain := apiobj.Service([]string{"10.96.0.2"}, corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP})
	plain.Spec.ExternalIPs = []string{"192.0.2.11"}
	got := Frontends(apiobj.Must(k8s.ToService(plain)), nil, node)
	if len(got) != 2 || got[1].Frontend != fe("192.0.2.11", 80, model.TCP) || got[1].Flags != model.External {
		t.Errorf("ClusterIP Service with an external IP: %v", got)
	}
}

// TestLocalEndpoints: a health check counts this node's ready endpoints; a
// dual-stack pod (one address per family) is one endpoint.
func TestLocalEndpoints(t *testing.T) {
	notReady := apiobj.Ptr(false)
	eps := []*model.EndpointSlice{
		apiobj.Must(k8s.ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv4, nil,
			apiobj.EP{Addr: "10.0.0.1", Node: "node1"}, apiobj.EP{Addr: "10.0.0.2", Node: "node1"},
			apiobj.EP{Addr: "10.0.0.3", Node: "node1", Ready: notReady}, apiobj.EP{Addr: "10.0.0.4", Node: "node2"}))),
		apiobj.Must(k8s.ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv6, nil, apiobj.EP{Addr: "fd00::1", Node: "node1"}, apiobj.EP{Addr: "fd00::2", Node: "node1"}))),
	}
	for node, want := range map[string]int{"node1": 2, "node2": 1, "node3": 0} {
		if got := LocalEndpoints(eps, node); got != want {
			t.Errorf("%s: %d local endpoints, want %d", node, got, want)
		}
	}
}

// TestAffinity: sessionAffinity ClientIP gives every frontend its timeout
// (the API's default when unset); None, none.
func TestAffinity(t *testing.T) {
	svc := apiobj.Service([]string{"10.96.0.1"}, corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080})
	svc.Spec.Type = corev1.ServiceTypeNodePort
	node := model.Node{Addrs: []netip.Addr{netip.MustParseAddr("172.30.0.1")}}
	for _, c := range []struct {
		affinity corev1.ServiceAffinity
		config   *corev1.SessionAffinityConfig
		want     uint32
	}{
		{corev1.ServiceAffinityNone, nil, 0},
		{corev1.ServiceAffinityClientIP, nil, k8s.DefaultAffinitySeconds},
		{corev1.ServiceAffinityClientIP, &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: apiobj.Ptr[int32](60)}}, 60},
	} {
		svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig = c.affinity, c.config
		fes := Frontends(apiobj.Must(k8s.ToService(svc)), nil, node)
		if len(fes) != 2 {
			t.Fatalf("%v", fes)
		}
		for _, f := range fes {
			if f.Affinity != c.want {
				t.Errorf("%s %v: affinity %d, want %d", c.affinity, f.Frontend, f.Affinity, c.want)
			}
		}
	}
}

// TestInternalTrafficPolicyLocal: the ClusterIPs get this node's endpoints
// only, flagged Local (dropped without one); external frontends keep their
// own policy.
func TestInternalTrafficPolicyLocal(t *testing.T) {
	svc := apiobj.Service([]string{"10.96.0.1"}, corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080})
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.InternalTrafficPolicy = apiobj.Ptr(corev1.ServiceInternalTrafficPolicyLocal)
	ports := []discoveryv1.EndpointPort{{Name: apiobj.Ptr("http"), Port: apiobj.Ptr[int32](8080), Protocol: apiobj.Ptr(corev1.ProtocolTCP)}}
	eps := []*model.EndpointSlice{apiobj.Must(k8s.ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv4, ports,
		apiobj.EP{Addr: "10.0.0.1", Node: "node1"}, apiobj.EP{Addr: "10.0.0.2", Node: "node2"})))}
	fes := Frontends(apiobj.Must(k8s.ToService(svc)), eps, model.Node{Name: "node2", Addrs: []netip.Addr{netip.MustParseAddr("172.30.0.2")}})
	if len(fes) != 2 {
		t.Fatalf("%v", fes)
	}
	if c := fes[0]; c.Flags != model.Local || !slices.Equal(c.Backends, []model.Backend{be("10.0.0.2:8080")}) {
		t.Errorf("ClusterIP: %+v, want Local with 10.0.0.2 only", c)
	}
	if n := fes[1]; n.Flags != model.External || len(n.Backends) != 2 {
		t.Errorf("NodePort (externalTrafficPolicy Cluster): %+v, want both endpoints", n)
	}
}

// TestTerminatingEndpoints: new flows go to ready endpoints, else to serving
// terminating ones; terminating endpoints not chosen are draining (their
// established flows are kept); not-ready ones get nothing.
func TestTerminatingEndpoints(t *testing.T) {
	svc := apiobj.Service([]string{"10.96.0.1"}, corev1.ServicePort{Name: "http", Port: 80})
	ports := []discoveryv1.EndpointPort{{Name: apiobj.Ptr("http"), Port: apiobj.Ptr[int32](8080), Protocol: apiobj.Ptr(corev1.ProtocolTCP)}}
	yes, no := apiobj.Ptr(true), apiobj.Ptr(false)
	for _, c := range []struct {
		name           string
		eps            []apiobj.EP
		ready, drained []model.Backend
	}{
		{"a ready endpoint", []apiobj.EP{
			{Addr: "10.0.0.1"},
			{Addr: "10.0.0.2", Ready: no, Serving: yes, Terminating: yes},
			{Addr: "10.0.0.3", Ready: no},
		}, []model.Backend{be("10.0.0.1:8080")}, []model.Backend{be("10.0.0.2:8080")}},
		{"none ready: serving terminating ones take new flows", []apiobj.EP{
			{Addr: "10.0.0.2", Ready: no, Serving: yes, Terminating: yes},
			{Addr: "10.0.0.4", Ready: no, Serving: no, Terminating: yes},
		}, []model.Backend{be("10.0.0.2:8080")}, []model.Backend{be("10.0.0.4:8080")}},
	} {
		fes := Frontends(apiobj.Must(k8s.ToService(svc)), []*model.EndpointSlice{apiobj.Must(k8s.ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv4, ports, c.eps...)))}, model.Node{})
		if len(fes) != 1 || !slices.Equal(fes[0].Backends, c.ready) || !slices.Equal(fes[0].Draining, c.drained) {
			t.Errorf("%s: %+v; want backends %v, draining %v", c.name, fes, c.ready, c.drained)
		}
	}
}

// TestAlgorithm: the annotation picks Maglev or random per Service, else
// the agent's default applies; a bad value is reported for hand-written
// input.
func TestAlgorithm(t *testing.T) {
	svc := apiobj.Service([]string{"10.96.0.1"}, corev1.ServicePort{Name: "http", Port: 80})
	for _, c := range []struct {
		annotation string
		def        model.Algorithm
		maglev     bool
	}{
		{"", model.AlgorithmRandom, false},
		{"", model.AlgorithmMaglev, true},
		{"maglev", model.AlgorithmRandom, true},
		{"random", model.AlgorithmMaglev, false},
	} {
		svc.Annotations = map[string]string{k8s.AnnotationAlgorithm: c.annotation}
		fes := Frontends(apiobj.Must(k8s.ToService(svc)), nil, model.Node{Algorithm: c.def})
		if got := fes[0].Flags&model.Maglev != 0; got != c.maglev {
			t.Errorf("annotation %q, default %d: Maglev %v, want %v", c.annotation, c.def, got, c.maglev)
		}
	}
	svc.Annotations = map[string]string{k8s.AnnotationAlgorithm: "round-robin"}
	if _, err := k8s.ToService(svc); err == nil || !strings.Contains(err.Error(), "round-robin") {
		t.Errorf("bad algorithm: %v", err)
	}
}

// TestSourceRanges: loadBalancerSourceRanges restrict the LoadBalancer IPs
// only (not NodePorts, not external IPs), each with its family's ranges; a
// family without ranges lets no client in (fail closed), and neither does
// any family when one range cannot be read.
func TestSourceRanges(t *testing.T) {
	svc := apiobj.Service([]string{"10.96.0.1", "fd00::1"}, corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080})
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalIPs = []string{"192.0.2.10"}
	svc.Spec.LoadBalancerSourceRanges = []string{"172.30.0.0/24", " 10.1.2.3/32"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}, {IP: "2001:db8::7"}}
	node := model.Node{Addrs: []netip.Addr{netip.MustParseAddr("172.30.0.1")}}
	want := []netip.Prefix{netip.MustParsePrefix("172.30.0.0/24"), netip.MustParsePrefix("10.1.2.3/32")}
	check := func(fes model.Frontends, v4Ranges []netip.Prefix) {
		t.Helper()
		// 2 ClusterIPs, 1 NodePort on the node's v4 address, 1 external
		// IP, 2 LoadBalancer IPs.
		if len(fes) != 6 {
			t.Fatalf("%d frontends, want 6: %v", len(fes), fes)
		}
		restricted := 0
		for _, f := range fes {
			isRestricted := f.Flags&model.SourceRanges != 0
			switch f.Frontend.Addr.String() {
			case "198.51.100.7":
				restricted++
				if !isRestricted || !slices.Equal(f.SourceRanges, v4Ranges) {
					t.Errorf("v4 LoadBalancer IP: %+v, want ranges %v", f, v4Ranges)
				}
			case "2001:db8::7": // no v6 range given: no v6 client allowed
				restricted++
				if !isRestricted || len(f.SourceRanges) != 0 {
					t.Errorf("v6 LoadBalancer IP: %+v, want restricted to no client", f)
				}
			default: // ClusterIPs, NodePort, external IP
				if isRestricted {
					t.Errorf("%s restricted: %+v", f.Frontend, f)
				}
			}
		}
		if restricted != 2 {
			t.Errorf("%d LoadBalancer frontends, want 2", restricted)
		}
	}
	check(Frontends(apiobj.Must(k8s.ToService(svc)), nil, node), want)

	svc.Spec.LoadBalancerSourceRanges = []string{"172.30.0.0/24", "10.1.2.300/32"}
	walled, err := k8s.ToService(svc)
	if err == nil || !strings.Contains(err.Error(), `spec.loadBalancerSourceRanges[1]: "10.1.2.300/32"`) || !k8s.FailsClosed(err) {
		t.Fatalf("invalid range: error %v, want it named and failing closed", err)
	}
	check(Frontends(walled, nil, node), nil)
}

// TestTopologyHints: a Service preferring close endpoints uses the ready
// endpoints hinted for this node's zone, but only when every ready endpoint
// is hinted and some are for the zone (kube-proxy's conditions); Local
// policies and other Services ignore hints.
func TestTopologyHints(t *testing.T) {
	ports := []discoveryv1.EndpointPort{{Name: apiobj.Ptr("http"), Port: apiobj.Ptr[int32](8080), Protocol: apiobj.Ptr(corev1.ProtocolTCP)}}
	hinted := func(addr string, zones ...string) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{addr}}
		if len(zones) > 0 {
			e.Hints = &discoveryv1.EndpointHints{}
			for _, z := range zones {
				e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
		}
		return e
	}
	sliceOf := func(eps ...discoveryv1.Endpoint) []*model.EndpointSlice {
		s := apiobj.Slice(discoveryv1.AddressTypeIPv4, ports)
		s.Endpoints = eps
		return []*model.EndpointSlice{apiobj.Must(k8s.ToEndpointSlice(s))}
	}
	onNode := func(e discoveryv1.Endpoint, node string) discoveryv1.Endpoint {
		if e.Hints == nil {
			e.Hints = &discoveryv1.EndpointHints{}
		}
		e.Hints.ForNodes = append(e.Hints.ForNodes, discoveryv1.ForNode{Name: node})
		return e
	}
	notReady := func(e discoveryv1.Endpoint) discoveryv1.Endpoint { e.Conditions.Ready = apiobj.Ptr(false); return e }
	runsOn := func(e discoveryv1.Endpoint, node string) discoveryv1.Endpoint {
		e.NodeName = apiobj.Ptr(node)
		return e
	}
	preferClose := apiobj.Ptr(corev1.ServiceTrafficDistributionPreferClose)
	sameNode := apiobj.Ptr(corev1.ServiceTrafficDistributionPreferSameNode)
	a, b, c := be("10.0.0.1:8080"), be("10.0.0.2:8080"), be("10.0.0.3:8080")
	for _, tc := range []struct {
		name string
		td   *string
		mode string
		zone string
		eps  []discoveryv1.Endpoint
		want []model.Backend
	}{
		{"PreferClose: this zone's endpoints", preferClose, "", "z1",
			[]discoveryv1.Endpoint{hinted("10.0.0.1", "z1"), hinted("10.0.0.2", "z2"), hinted("10.0.0.3", "z2", "z1")}, []model.Backend{a, c}},
		{"topology-mode Auto annotation", nil, "Auto", "z2",
			[]discoveryv1.Endpoint{hinted("10.0.0.1", "z1"), hinted("10.0.0.2", "z2")}, []model.Backend{b}},
		{"an endpoint without hints: all", preferClose, "", "z1",
			[]discoveryv1.Endpoint{hinted("10.0.0.1", "z1"), hinted("10.0.0.2")}, []model.Backend{a, b}},
		{"none for this zone: all", preferClose, "", "z3",
			[]discoveryv1.Endpoint{hinted("10.0.0.1", "z1"), hinted("10.0.0.2", "z2")}, []model.Backend{a, b}},
		{"zone unknown: all", preferClose, "", "",
			[]discoveryv1.Endpoint{hinted("10.0.0.1", "z1"), hinted("10.0.0.2", "z2")}, []model.Backend{a, b}},
		{"not asked for: all", nil, "", "z1",
			[]discoveryv1.Endpoint{hinted("10.0.0.1", "z1"), hinted("10.0.0.2", "z2")}, []model.Backend{a, b}},
		{"PreferSameNode: this node's endpoints", sameNode, "", "z1",
			[]discoveryv1.Endpoint{onNode(hinted("10.0.0.1", "z1"), "n2"), onNode(hinted("10.0.0.2", "z1"), "n1"), onNode(hinted("10.0.0.3", "z2"), "n3")}, []model.Backend{b}},
		{"PreferSameNode, none for this node: this zone's", sameNode, "", "z1",
			[]discoveryv1.Endpoint{onNode(hinted("10.0.0.1", "z1"), "n2"), onNode(hinted("10.0.0.2", "z2"), "n3")}, []model.Backend{a}},
		{"a not-ready endpoint without hints does not disable them", preferClose, "", "z1",
			[]discoveryv1.Endpoint{hinted("10.0.0.1", "z1"), hinted("10.0.0.2", "z2"), notReady(hinted("10.0.0.3"))}, []model.Backend{a}},
		{"internalTrafficPolicy Local ignores hints: this node's endpoints", preferClose, "local", "z1",
			[]discoveryv1.Endpoint{runsOn(hinted("10.0.0.1", "z2"), "n1"), runsOn(hinted("10.0.0.2", "z1"), "n2")}, []model.Backend{a}},
	} {
		svc := apiobj.Service([]string{"10.96.0.1"}, corev1.ServicePort{Name: "http", Port: 80})
		if tc.mode == "local" {
			tc.mode, svc.Spec.InternalTrafficPolicy = "", apiobj.Ptr(corev1.ServiceInternalTrafficPolicyLocal)
		}
		svc.Spec.TrafficDistribution = tc.td
		if tc.mode != "" {
			svc.Annotations = map[string]string{corev1.AnnotationTopologyMode: tc.mode}
		}
		fes := Frontends(apiobj.Must(k8s.ToService(svc)), sliceOf(tc.eps...), model.Node{Name: "n1", Zone: tc.zone})
		if len(fes) != 1 || !slices.Equal(fes[0].Backends, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, fes, tc.want)
		}
	}
}
