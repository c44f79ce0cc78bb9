package lbipam

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestServiceCacheKeepsTheConcerned: a table of watch events. The cache
// keeps LoadBalancers and Services still holding addresses or the cleanup
// finalizer, drops the rest as they come, and wakes the assigner only
// when what it keeps changes: a ClusterIP Service's changes never do,
// one that stops being concerned does once, as it leaves.
func TestServiceCacheKeepsTheConcerned(t *testing.T) {
	svc := func(name string, typ corev1.ServiceType, mod func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}, Spec: corev1.ServiceSpec{Type: typ}}
		if mod != nil {
			mod(s)
		}
		return s
	}
	holding := func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	}
	finalized := func(s *corev1.Service) { s.Finalizers = []string{CleanupFinalizer} }
	steps := []struct {
		what    string
		svc     *corev1.Service
		deleted bool
		kicks   int
		held    []string
	}{
		{"a LoadBalancer is kept", svc("lb", corev1.ServiceTypeLoadBalancer, nil), false, 1, []string{"lb"}},
		{"a ClusterIP is not", svc("web", corev1.ServiceTypeClusterIP, nil), false, 0, []string{"lb"}},
		{"nor its changes", svc("web", corev1.ServiceTypeClusterIP, func(s *corev1.Service) { s.Labels = map[string]string{"a": "b"} }), false, 0, []string{"lb"}},
		{"a ClusterIP made a LoadBalancer is", svc("web", corev1.ServiceTypeLoadBalancer, nil), false, 1, []string{"lb", "web"}},
		{"made a ClusterIP, it still holds its addresses", svc("web", corev1.ServiceTypeClusterIP, holding), false, 1, []string{"lb", "web"}},
		{"then only the finalizer", svc("web", corev1.ServiceTypeClusterIP, finalized), false, 1, []string{"lb", "web"}},
		{"given back, it leaves", svc("web", corev1.ServiceTypeClusterIP, nil), false, 1, []string{"lb"}},
		{"a deleted ClusterIP wakes nothing", svc("web", corev1.ServiceTypeClusterIP, nil), true, 0, []string{"lb"}},
		{"a deleted LoadBalancer leaves", svc("lb", corev1.ServiceTypeLoadBalancer, nil), true, 1, nil},
	}
	kicks := 0
	c := &serviceCache{kick: func() { kicks++ }, byKey: map[types.NamespacedName]*corev1.Service{}}
	for _, s := range steps {
		kicks = 0
		c.apply(s.svc, s.deleted)
		var held []string
		for _, k := range c.services() {
			held = append(held, k.Name)
			if k.ManagedFields != nil {
				t.Errorf("%s: %s kept with its managed fields", s.what, k.Name)
			}
		}
		if kicks != s.kicks || !sameNames(held, s.held) {
			t.Errorf("%s: held %v with %d kicks, want %v with %d", s.what, held, kicks, s.held, s.kicks)
		}
	}
}

func sameNames(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
