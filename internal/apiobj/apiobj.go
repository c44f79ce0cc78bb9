// Package apiobj builds Kubernetes API objects for tests, as a user would
// write them, so tests of conversion and of load balancing start from the
// same input.
package apiobj

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// Service is default/web with these cluster IPs and ports.
func Service(ips []string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ServiceSpec{ClusterIP: ips[0], ClusterIPs: ips, Ports: ports},
	}
}

// EP is one endpoint: its address, conditions (nil: unset) and node.
type EP struct {
	Addr                        string
	Ready, Serving, Terminating *bool
	Node                        string
}

// Slice is an EndpointSlice of default/web with these ports and endpoints.
func Slice(family discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...EP) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + strings.ToLower(string(family)), Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: family,
		Ports:       ports,
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.Addr},
			Conditions: discoveryv1.EndpointConditions{Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating},
			NodeName:   Ptr(e.Node)})
	}
	return s
}

// Must returns a conversion's result, panicking on input the test meant
// to be valid.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
