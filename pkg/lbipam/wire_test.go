package lbipam

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMayConcernReadsTheEncoding: mayConcern, reading a Service's protobuf
// encoding, agrees with concerned on the decoded Service for every kind
// of Service the assigner keeps or drops; and keeps what it cannot read,
// so that a full decode judges it.
func TestMayConcernReadsTheEncoding(t *testing.T) {
	lb := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }
	cases := []struct {
		what string
		mod  func(*corev1.Service)
		want bool
	}{
		{"a LoadBalancer", lb, true},
		{"a LoadBalancer with its addresses", func(s *corev1.Service) {
			lb(s)
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
		}, true},
		{"a ClusterIP", nil, false},
		{"a NodePort", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }, false},
		{"an ExternalName", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }, false},
		{"a ClusterIP still holding an address", func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example"}}
		}, true},
		{"a ClusterIP with the cleanup finalizer", func(s *corev1.Service) {
			s.Finalizers = []string{"example.com/other", CleanupFinalizer}
		}, true},
		{"a ClusterIP with another finalizer", func(s *corev1.Service) { s.Finalizers = []string{"example.com/other"} }, false},
		{"a ClusterIP with status conditions only", func(s *corev1.Service) {
			s.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Fine"}}
		}, false},
		{"a type that only starts like LoadBalancer", func(s *corev1.Service) { s.Spec.Type = "LoadBalancerX" }, false},
	}
	for _, c := range cases {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s", Labels: map[string]string{"app": "web"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}}
		if c.mod != nil {
			c.mod(svc)
		}
		b, err := svc.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if concerned(svc) != c.want {
			t.Fatalf("%s: concerned says %v, the table %v", c.what, concerned(svc), c.want)
		}
		if got := mayConcern(b); got != c.want {
			t.Errorf("%s: mayConcern(encoding) = %v, concerned = %v", c.what, got, c.want)
		}
		// Cut short, the encoding cannot be read: kept, for a full decode.
		if !mayConcern(b[:len(b)-1]) {
			t.Errorf("%s: an encoding cut short was dropped unread", c.what)
		}
	}
}
