package k8s

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/pkg/model"
)

// TestToSlice: a valid NetworkSlice, its defaults, and each bad field
// refused with its name.
func TestToSlice(t *testing.T) {
	ok := &NetworkSlice{ObjectMeta: metav1.ObjectMeta{Name: "urllc"}, Spec: NetworkSliceSpec{Class: "latency", EgressRate: "100M", Burst: "64Ki",
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ran"}}}}
	s, err := ToSlice(ok)
	if err != nil || s.Class != model.Latency || s.DSCP != 46 || s.Rate != 100_000_000 || s.Burst != 65536 || s.Pods == nil || s.Namespaces != nil {
		t.Fatalf("ToSlice = %+v, %v", s, err)
	}
	dscp := func(v int32) *int32 { return &v }
	for _, c := range []struct {
		spec  NetworkSliceSpec
		field string
	}{
		{NetworkSliceSpec{Class: "urgent"}, "spec.class"},
		{NetworkSliceSpec{Class: "latency", DSCP: dscp(64)}, "spec.dscp"},
		{NetworkSliceSpec{Class: "throughput", EgressRate: "0"}, "spec.egressRate"},
		{NetworkSliceSpec{Class: "throughput", EgressRate: "-5M"}, "spec.egressRate"},
		{NetworkSliceSpec{Class: "throughput", EgressRate: "fast"}, "spec.egressRate"},
		{NetworkSliceSpec{Class: "throughput", Burst: "1Mi"}, "spec.burst"},
		{NetworkSliceSpec{Class: "latency", PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}, "spec.podSelector"},
	} {
		_, err := ToSlice(&NetworkSlice{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: c.spec})
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: error %v, want one naming %s", c.spec, err, c.field)
		}
	}
	if s, err := ToSlice(&NetworkSlice{ObjectMeta: metav1.ObjectMeta{Name: "bulk"}, Spec: NetworkSliceSpec{Class: "throughput"}}); err != nil || s.DSCP != 10 {
		t.Errorf("throughput's default DSCP: %+v, %v", s, err)
	}
}

// TestPodEgressBandwidth: the annotation's rate, or an error naming it
// (and no rate).
func TestPodEgressBandwidth(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "x", Annotations: map[string]string{EgressBandwidthAnnotation: "10M"}},
		Status: corev1.PodStatus{PodIP: "10.244.1.5"}}
	if m, err := ToPod(p); err != nil || m.EgressBandwidth != 10_000_000 {
		t.Fatalf("ToPod = %+v, %v; want 10 Mbit/s", m, err)
	}
	p.Annotations[EgressBandwidthAnnotation] = "ten"
	m, err := ToPod(p)
	if err == nil || !strings.Contains(err.Error(), EgressBandwidthAnnotation) || m == nil || m.EgressBandwidth != 0 {
		t.Errorf("a bad annotation: %+v, %v; want the pod, no rate, and an error naming the annotation", m, err)
	}
	delete(p.Annotations, EgressBandwidthAnnotation)
	p.Annotations[IngressBandwidthAnnotation] = "40M"
	if m, err := ToPod(p); err != nil || m.IngressBandwidth != 40_000_000 || m.EgressBandwidth != 0 {
		t.Fatalf("ToPod = %+v, %v; want 40 Mbit/s in", m, err)
	}
	p.Annotations[IngressBandwidthAnnotation] = "0"
	if m, err := ToPod(p); err == nil || !strings.Contains(err.Error(), IngressBandwidthAnnotation) || m.IngressBandwidth != 0 {
		t.Errorf("a zero ingress rate: %+v, %v; want no rate and an error naming the annotation", m, err)
	}
}
