package k8s

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/internal/apiobj"
	"github.com/netcube/netcube/pkg/model"
)

// validLB is a Service using every field the datapath reads.
func validLB() *corev1.Service {
	svc := apiobj.Service([]string{"10.96.0.1", "fd00::1"},
		corev1.ServicePort{Name: "http", Port: 80, NodePort: 30080},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, NodePort: 30053})
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 31000
	svc.Spec.ExternalIPs = []string{"192.0.2.10"}
	svc.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: apiobj.Ptr[int32](60)}}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}, {Hostname: "lb.example"}}
	return svc
}

// TestServiceFieldsValidated: every field the datapath uses is checked, an
// invalid one is named (object field path and value) and left out, and
// the rest of the Service is still programmed.
func TestServiceFieldsValidated(t *testing.T) {
	if got, err := ToService(validLB()); err != nil || got == nil {
		t.Fatalf("valid Service: %v, %v", got, err)
	}
	cases := []struct {
		name  string
		edit  func(*corev1.Service)
		error string
		check func(*testing.T, *model.Service) // the rest is kept
	}{
		{"external IP", func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.300", "192.0.2.11"} },
			`spec.externalIPs[0]: "192.0.2.300" is not an IP address`,
			func(t *testing.T, s *model.Service) {
				if len(s.External.IPs) != 1 || s.External.IPs[0] != netip.MustParseAddr("192.0.2.11") {
					t.Errorf("external IPs %v, want only the valid one", s.External.IPs)
				}
			}},
		{"node port", func(s *corev1.Service) { s.Spec.Ports[0].NodePort = 70000 },
			"spec.ports[0].nodePort: 70000 is not in 1-65535",
			func(t *testing.T, s *model.Service) {
				if s.Ports()[0].NodePort != 0 || s.Ports()[1].NodePort != 30053 || len(s.Ports()) != 2 {
					t.Errorf("ports %+v, want the invalid NodePort left out, the port kept", s.Ports())
				}
			}},
		{"node port on a ClusterIP Service", func(s *corev1.Service) {
			s.Spec.Type, s.Spec.HealthCheckNodePort, s.Spec.LoadBalancerSourceRanges = corev1.ServiceTypeClusterIP, 0, nil
		}, "spec.ports[0].nodePort: 30080 on a Service of type ClusterIP", func(t *testing.T, s *model.Service) {
			if s.Ports()[0].NodePort != 0 || len(s.External.LoadBalancerIPs) != 0 || len(s.External.IPs) != 1 {
				t.Errorf("ports %+v, external %+v: want only the external IP", s.Ports(), s.External)
			}
		}},
		{"health check node port", func(s *corev1.Service) { s.Spec.HealthCheckNodePort = -1 },
			"spec.healthCheckNodePort: -1 is not in 1-65535",
			func(t *testing.T, s *model.Service) {
				if s.External.HealthCheckNodePort != 0 || !s.External.LocalOnly {
					t.Errorf("%+v: want no health check, still Local", s.External)
				}
			}},
		{"health check node port without Local", func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		}, "spec.healthCheckNodePort: 31000 needs type LoadBalancer with externalTrafficPolicy Local", nil},
		{"load balancer ingress IP", func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "lb"})
		}, `status.loadBalancer.ingress[2].ip: "lb" is not an IP address`,
			func(t *testing.T, s *model.Service) {
				if len(s.External.LoadBalancerIPs) != 1 {
					t.Errorf("LB IPs %v, want the valid one", s.External.LoadBalancerIPs)
				}
			}},
		{"affinity timeout too long", func(s *corev1.Service) {
			s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = apiobj.Ptr[int32](86401)
		},
			"spec.sessionAffinityConfig.clientIP.timeoutSeconds: 86401 is not in 1-86400",
			func(t *testing.T, s *model.Service) {
				if s.Affinity != DefaultAffinitySeconds {
					t.Errorf("affinity %d, want the default", s.Affinity)
				}
			}},
		{"affinity timeout zero", func(s *corev1.Service) { s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = apiobj.Ptr[int32](0) },
			"timeoutSeconds: 0 is not in 1-86400", nil},
		{"session affinity kind", func(s *corev1.Service) { s.Spec.SessionAffinity = "Cookie" },
			`spec.sessionAffinity: "Cookie" is not None or ClientIP`, nil},
		{"cluster IP", func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.1", "fd00::g"} },
			`spec.clusterIPs[1]: "fd00::g" is not an IP address`,
			func(t *testing.T, s *model.Service) {
				if len(s.ClusterIPs()) != 1 {
					t.Errorf("cluster IPs %v, want the valid one", s.ClusterIPs())
				}
			}},
		{"more cluster IPs than families", func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.1", "fd00::1", "10.96.0.2"} },
			"spec.clusterIPs: 3 addresses, at most 2 (one per family); [10.96.0.2] ignored",
			func(t *testing.T, s *model.Service) {
				if got := s.ClusterIPs(); len(got) != 2 || got[0] != netip.MustParseAddr("10.96.0.1") || got[1] != netip.MustParseAddr("fd00::1") {
					t.Errorf("cluster IPs %v, want the first two", got)
				}
			}},
		{"no cluster IP and not headless", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil },
			"spec.clusterIP: no valid cluster IP (and not headless): netcube programs nothing for this Service",
			func(t *testing.T, s *model.Service) {
				if s != nil {
					t.Errorf("programmed %+v", s)
				}
			}},
		{"unknown type", func(s *corev1.Service) { s.Spec.Type = "Gateway" },
			`spec.type: "Gateway" is not a type netcube programs`, nil},
		{"port", func(s *corev1.Service) { s.Spec.Ports[1].Port = 0 },
			"spec.ports[1].port: 0 is not in 1-65535",
			func(t *testing.T, s *model.Service) {
				if len(s.Ports()) != 1 || s.Ports()[0].Port != 80 {
					t.Errorf("ports %+v, want the valid one", s.Ports())
				}
			}},
		{"protocol", func(s *corev1.Service) { s.Spec.Ports[1].Protocol = "ICMP" },
			`spec.ports[1].protocol: "ICMP" is not supported (TCP, UDP, SCTP)`,
			func(t *testing.T, s *model.Service) {
				if len(s.Ports()) != 1 || s.Ports()[0].Port != 80 {
					t.Errorf("ports %+v, want the valid one", s.Ports())
				}
			}},
		{"unnamed port among several", func(s *corev1.Service) { s.Spec.Ports[1].Name = "" },
			"spec.ports[1].name: required when a Service has several ports", nil},
		{"algorithm annotation", func(s *corev1.Service) { s.Annotations = map[string]string{AnnotationAlgorithm: "round-robin"} },
			`metadata.annotations[netcube.io/lb-algorithm]: load-balancing algorithm "round-robin"`, nil},
		{"source range", func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "everyone"} },
			`spec.loadBalancerSourceRanges[1]: "everyone" is not a CIDR`,
			func(t *testing.T, s *model.Service) {
				if !s.External.Walled || !s.External.Restricted || len(s.External.SourceRanges) != 0 {
					t.Errorf("%+v: want walled (no client)", s.External)
				}
			}},
		{"source ranges on a NodePort Service", func(s *corev1.Service) { s.Spec.Type, s.Spec.HealthCheckNodePort = corev1.ServiceTypeNodePort, 0 },
			"spec.loadBalancerSourceRanges: set on a Service of type NodePort", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := validLB()
			c.edit(in)
			got, err := ToService(in)
			if err == nil || !strings.Contains(err.Error(), c.error) {
				t.Fatalf("error %v, want it to say %q", err, c.error)
			}
			if FailsClosed(err) != (c.name == "source range") {
				t.Errorf("FailsClosed %v", FailsClosed(err))
			}
			if c.check != nil {
				c.check(t, got)
			}
		})
	}
}

// TestSCTPService: an SCTP port is programmed as a TCP or UDP one is, on
// every kind of frontend (ClusterIP, NodePort, LoadBalancer, ExternalIP),
// its targetPort free to differ from its port (the datapath updates the
// CRC32c when the port changes), and so is an SCTP EndpointSlice port.
func TestSCTPService(t *testing.T) {
	svc := validLB()
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "sigtran", Port: 2905, Protocol: corev1.ProtocolSCTP,
		TargetPort: intstr.FromInt32(3905), NodePort: 30905})
	got, err := ToService(svc)
	if err != nil || got == nil {
		t.Fatalf("SCTP Service: %v, %v", got, err)
	}
	want := model.ServicePort{Name: "sigtran", Port: 2905, Proto: model.SCTP, NodePort: 30905}
	if len(got.Ports()) != 3 || got.Ports()[2] != want {
		t.Errorf("ports %+v, want the SCTP port %+v beside TCP and UDP", got.Ports(), want)
	}
	if len(got.External.LoadBalancerIPs) != 1 || len(got.External.IPs) != 1 {
		t.Errorf("external %+v: want its LoadBalancer IP and ExternalIP, as for TCP", got.External)
	}

	ports := []discoveryv1.EndpointPort{{Name: apiobj.Ptr("sigtran"), Port: apiobj.Ptr[int32](3905), Protocol: apiobj.Ptr(corev1.ProtocolSCTP)}}
	slice, err := ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv4, ports, apiobj.EP{Addr: "10.0.0.1"}))
	if err != nil || slice == nil || len(slice.Ports()) != 1 || slice.Ports()[0].Proto != model.SCTP {
		t.Errorf("SCTP slice: %+v, %v; want its port, SCTP", slice, err)
	}
	// Negative: a protocol Kubernetes does not have is still refused.
	ports[0].Protocol = apiobj.Ptr(corev1.Protocol("ICMP"))
	if _, err := ToEndpointSlice(apiobj.Slice(discoveryv1.AddressTypeIPv4, ports, apiobj.EP{Addr: "10.0.0.1"})); err == nil ||
		!strings.Contains(err.Error(), `ports[0].protocol: "ICMP" is not supported (TCP, UDP, SCTP)`) {
		t.Errorf("ICMP slice port: %v", err)
	}
}

// TestNotProgrammedIsNotAnError: headless and ExternalName Services are
// valid, and netcube has nothing to program for them.
func TestNotProgrammedIsNotAnError(t *testing.T) {
	headless := apiobj.Service([]string{"None"}, corev1.ServicePort{Port: 80})
	ext := apiobj.Service([]string{"10.96.0.1"}, corev1.ServicePort{Port: 80})
	ext.Spec.Type, ext.Spec.ClusterIP, ext.Spec.ClusterIPs, ext.Spec.ExternalName = corev1.ServiceTypeExternalName, "", nil, "example.com"
	for _, svc := range []*corev1.Service{headless, ext} {
		if got, err := ToService(svc); got != nil || err != nil {
			t.Errorf("%+v: got %v, %v; want nothing, no error", svc.Spec, got, err)
		}
	}
}

// TestEndpointSliceFieldsValidated: a slice without the service-name label
// is reported (it used to vanish silently), and invalid ports and
// addresses are named and left out.
func TestEndpointSliceFieldsValidated(t *testing.T) {
	ports := []discoveryv1.EndpointPort{{Name: apiobj.Ptr("http"), Port: apiobj.Ptr[int32](8080)}, {Name: apiobj.Ptr("big"), Port: apiobj.Ptr[int32](70000)}}
	s := apiobj.Slice(discoveryv1.AddressTypeIPv4, ports, apiobj.EP{Addr: "10.0.0.1"}, apiobj.EP{Addr: "fd00::1"}, apiobj.EP{Addr: "10.0.0.2"})
	got, err := ToEndpointSlice(s)
	for _, want := range []string{"ports[1].port: 70000 is not in 1-65535", `endpoints[1].addresses[0]: "fd00::1" is not an IPv4 address`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if got == nil || len(got.Endpoints) != 2 || len(got.Ports()) != 1 {
		t.Errorf("got %+v, want the 2 valid endpoints and the valid port", got)
	}

	delete(s.Labels, ServiceNameLabel)
	got, err = ToEndpointSlice(s)
	if got != nil || err == nil || !strings.Contains(err.Error(), "metadata.labels[kubernetes.io/service-name]: missing") {
		t.Errorf("unlabelled slice: %v, %v; want it reported", got, err)
	}
	s.AddressType = "IPv5"
	if _, err := ToEndpointSlice(s); err == nil || !strings.Contains(err.Error(), `addressType: "IPv5"`) {
		t.Errorf("bad address type: %v", err)
	}
	s.AddressType = discoveryv1.AddressTypeFQDN
	if got, err := ToEndpointSlice(s); got != nil || err != nil {
		t.Errorf("FQDN slice: %v, %v; want nothing, no error", got, err)
	}
}

// TestEndpointSliceTriggerTime: the EndpointSlice controller's
// last-change-trigger-time is read to the nanosecond (network programming
// latency is timed from it); an unreadable one is named, and the slice's
// endpoints are still used.
func TestEndpointSliceTriggerTime(t *testing.T) {
	s := apiobj.Slice(discoveryv1.AddressTypeIPv4, nil, apiobj.EP{Addr: "10.0.0.1"})
	s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-11-27T01:02:03.456789012Z"}
	got, err := ToEndpointSlice(s)
	if want := time.Date(2026, 11, 27, 1, 2, 3, 456789012, time.UTC).UnixNano(); err != nil || got.ChangeTriggered != want {
		t.Fatalf("trigger time %d (err %v), want %d", got.ChangeTriggered, err, want)
	}
	s.Annotations[corev1.EndpointsLastChangeTriggerTime] = "yesterday"
	got, err = ToEndpointSlice(s)
	if err == nil || !strings.Contains(err.Error(), `metadata.annotations[endpoints.kubernetes.io/last-change-trigger-time]: "yesterday" is not an RFC 3339 time`) {
		t.Errorf("unreadable trigger time: error %v does not name it", err)
	}
	if got == nil || got.ChangeTriggered != 0 || len(got.Endpoints) != 1 {
		t.Errorf("unreadable trigger time: got %+v, want the endpoint and no time", got)
	}
}

func TestNodePodCIDRs(t *testing.T) {
	for _, c := range []struct {
		name   string
		spec   corev1.NodeSpec
		want   string
		errors []string
	}{
		{"dual stack", corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}}, "[10.244.1.0/24 fd00:10:244:1::/64]", nil},
		{"masked", corev1.NodeSpec{PodCIDRs: []string{"10.244.1.7/24"}}, "[10.244.1.0/24]", nil},
		{"only the old field", corev1.NodeSpec{PodCIDR: "10.244.3.0/24"}, "[10.244.3.0/24]", nil},
		{"none", corev1.NodeSpec{}, "[]", nil},
		{"invalid and doubled", corev1.NodeSpec{PodCIDRs: []string{"10.244.300.0/24", "fd00::/64", "fd01::/64"}}, "[fd00::/64]",
			[]string{`spec.podCIDRs[0]: "10.244.300.0/24" is not a CIDR`, "spec.podCIDRs[2]: fd01::/64 is a second CIDR of its family"}},
	} {
		n, err := ToNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: c.spec})
		if got := fmt.Sprint(n.PodCIDRs); got != c.want {
			t.Errorf("%s: pod CIDRs %s, want %s", c.name, got, c.want)
		}
		if (err != nil) != (c.errors != nil) {
			t.Errorf("%s: error %v", c.name, err)
		}
		for _, e := range c.errors {
			if !strings.Contains(err.Error(), e) {
				t.Errorf("%s: error %q does not say %q", c.name, err, e)
			}
		}
	}
}

// TestNamespacesShared: the Services and EndpointSlices of a namespace,
// each decoded with its own copy of the namespace's name, keep one copy
// between them; another namespace keeps its own.
func TestNamespacesShared(t *testing.T) {
	decoded := func(ns string) string { return string([]byte(ns)) } // a copy, as a decoder makes
	ids := []model.ServiceID{}
	for i, ns := range []string{"team-a", "team-a", "team-b"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("s", i), Namespace: decoded(ns)},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
		s, err := ToService(svc)
		if err != nil || s == nil {
			t.Fatalf("ToService: %v", err)
		}
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("s", i, "-x"), Namespace: decoded(ns),
			Labels: map[string]string{ServiceNameLabel: s.ID.Name}}}
		id, ok := ServiceOf(slice)
		if !ok || id != s.ID {
			t.Fatalf("slice of %v, want %v", id, s.ID)
		}
		ids = append(ids, s.ID, id)
	}
	data := func(s string) *byte { return unsafe.StringData(s) }
	for _, id := range ids[1:4] {
		if data(id.Namespace) != data(ids[0].Namespace) {
			t.Errorf("%s: its namespace is a copy of its own, want team-a's shared one", id)
		}
	}
	if ids[4].Namespace != "team-b" || data(ids[4].Namespace) == data(ids[0].Namespace) {
		t.Errorf("team-b's Service has namespace %q at team-a's", ids[4].Namespace)
	}
}
