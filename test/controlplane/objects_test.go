package controlplane

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/pkg/model"
)

func ptr[T any](v T) *T { return &v }

// service is a dual-stack ClusterIP Service with an HTTP (named target
// port) and a DNS port.
func service(ns, name string, labels map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			IPFamilyPolicy: ptr(corev1.IPFamilyPolicyRequireDualStack),
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("web")},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
			},
		},
	}
}

type endpoint struct {
	addr                        string
	ready, serving, terminating bool
}

func ready(addrs ...string) []endpoint {
	var out []endpoint
	for _, a := range addrs {
		out = append(out, endpoint{addr: a, ready: true, serving: true})
	}
	return out
}

func slice(ns, service, name string, ipv6 bool, eps []endpoint) *discoveryv1.EndpointSlice {
	family := discoveryv1.AddressTypeIPv4
	if ipv6 {
		family = discoveryv1.AddressTypeIPv6
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: family,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr("http"), Port: ptr[int32](8080), Protocol: ptr(corev1.ProtocolTCP)},
			{Name: ptr("dns"), Port: ptr[int32](5353), Protocol: ptr(corev1.ProtocolUDP)},
		},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{e.addr}, NodeName: ptr("node1"),
			Conditions: discoveryv1.EndpointConditions{Ready: &e.ready, Serving: &e.serving, Terminating: &e.terminating},
		})
	}
	return s
}

// expect is what the maps must hold for a Service: each ClusterIP x port
// with the given backends (by address; ports follow from the port).
func expect(svc *corev1.Service, v4, v6 []string) map[model.Frontend][]model.Backend {
	out := map[model.Frontend][]model.Backend{}
	for _, ipStr := range svc.Spec.ClusterIPs {
		ip := netip.MustParseAddr(ipStr)
		addrs := v6
		if ip.Is4() {
			addrs = v4
		}
		for _, p := range []struct {
			port, target uint16
			proto        model.Proto
		}{{80, 8080, model.TCP}, {53, 5353, model.UDP}} {
			fe := model.Frontend{Addr: ip, Port: p.port, Proto: p.proto}
			var bs []model.Backend
			for _, a := range addrs {
				bs = append(bs, model.Backend{Addr: netip.MustParseAddr(a), Port: p.target})
			}
			out[fe] = bs
		}
	}
	return out
}

// holds says whether got contains exactly want's frontends with want's
// backends (in any order); other frontends in got are ignored.
func holds(got, want map[model.Frontend][]model.Backend) bool {
	for fe, bs := range want {
		g, ok := got[fe]
		if !ok || len(g) != len(bs) {
			return false
		}
		for _, b := range bs {
			if !slices.Contains(g, b) {
				return false
			}
		}
	}
	return true
}

func absent(got map[model.Frontend][]model.Backend, svc *corev1.Service) bool {
	for fe := range got {
		for _, ip := range svc.Spec.ClusterIPs {
			if fe.Addr.String() == ip {
				return false
			}
		}
	}
	return true
}

func describe(f map[model.Frontend][]model.Backend) string { return fmt.Sprint(f) }
