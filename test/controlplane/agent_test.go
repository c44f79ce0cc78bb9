package controlplane

import (
	"github.com/netcube/netcube/internal/testenv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/pkg/source/kube"
)

const bound = 2 * time.Second // API write -> datapath programmed

// TestAgentFollowsTheAPI: Services and EndpointSlices created, changed and
// deleted through the API reach the datapath maps within a bound, with
// kube-proxy's semantics.
func TestAgentFollowsTheAPI(t *testing.T) {
	a := startAgent(t, pinDir(t))
	c, ns := env.Client, "follow"
	if _, err := c.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The API server's own Service is there from the start.
	kubernetes, err := c.CoreV1().Services("default").Get(ctx(t), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "the kubernetes Service", func() bool { return !absent(programmed(t, a.pins), kubernetes) })

	svc, err := c.CoreV1().Services(ns).Create(ctx(t), service(ns, "web", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("API server assigned %v, want one IPv4 and one IPv6 ClusterIP", svc.Spec.ClusterIPs)
	}
	steps := []struct {
		name   string
		write  func() error
		v4, v6 []string
	}{
		{"Service without endpoints: frontends with no backends (reject)", func() error { return nil }, nil, nil},
		{"slices created", func() error {
			if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), slice(ns, "web", "web-a", false, ready("10.244.1.10", "10.244.2.10")), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), slice(ns, "web", "web-b", true, ready("fd00:10:244:1::10")), metav1.CreateOptions{})
			return err
		}, []string{"10.244.1.10", "10.244.2.10"}, []string{"fd00:10:244:1::10"}},
		{"a second IPv4 slice is merged", func() error {
			_, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), slice(ns, "web", "web-c", false, ready("10.244.3.10")), metav1.CreateOptions{})
			return err
		}, []string{"10.244.1.10", "10.244.2.10", "10.244.3.10"}, []string{"fd00:10:244:1::10"}},
		{"an endpoint becomes not ready, another terminates", func() error {
			eps := []endpoint{{addr: "10.244.1.10", ready: true, serving: true}, {addr: "10.244.2.10"},
				{addr: "10.244.9.10", serving: true, terminating: true}}
			_, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx(t), slice(ns, "web", "web-a", false, eps), metav1.UpdateOptions{})
			return err
		}, []string{"10.244.1.10", "10.244.3.10"}, []string{"fd00:10:244:1::10"}},
		{"no ready IPv4 endpoint left: the serving terminating one takes over", func() error {
			if err := c.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), "web-c", metav1.DeleteOptions{}); err != nil {
				return err
			}
			eps := []endpoint{{addr: "10.244.1.10"}, {addr: "10.244.9.10", serving: true, terminating: true}}
			_, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx(t), slice(ns, "web", "web-a", false, eps), metav1.UpdateOptions{})
			return err
		}, []string{"10.244.9.10"}, []string{"fd00:10:244:1::10"}},
	}
	for _, s := range steps {
		if err := s.write(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		want := expect(svc, s.v4, s.v6)
		took := testenv.WaitFor(t, bound, s.name, func() bool { return holds(programmed(t, a.pins), want) })
		t.Logf("%s: programmed %s after the write", s.name, took.Round(time.Millisecond))
	}

	if err := c.CoreV1().Services(ns).Delete(ctx(t), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "deleted Service gone", func() bool { return absent(programmed(t, a.pins), svc) })

	// The agent reports what it did.
	metrics := a.get("/metrics", a.metrics)
	for _, want := range []string{"netcube_service_sync_duration_seconds_count", `netcube_map_operations_total{map="lb_services",op="update",result="ok"}`,
		"netcube_last_successful_sync_timestamp_seconds", `netcube_map_fill_ratio{map="lb_services"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if a.get("/healthz", a.healthz) != "ok" {
		t.Error("/healthz not ok")
	}
}

// TestServicesNotOurs: Services of another proxy, headless and ExternalName
// Services are never programmed.
func TestServicesNotOurs(t *testing.T) {
	a := startAgent(t, pinDir(t))
	c, ns := env.Client, "default"
	other := service(ns, "other-proxy", map[string]string{kube.LabelServiceProxyName: "someone-else"})
	headless := service(ns, "headless", nil)
	headless.Spec.ClusterIP, headless.Spec.IPFamilyPolicy = corev1.ClusterIPNone, nil
	external := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "external", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}}
	var created []*corev1.Service
	for _, s := range []*corev1.Service{other, headless, external} {
		got, err := c.CoreV1().Services(ns).Create(ctx(t), s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, got)
		t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), s.Name, metav1.DeleteOptions{}) })
	}
	for _, s := range []string{"other-proxy", "headless"} {
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), slice(ns, s, s, false, ready("10.244.1.99")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A Service of ours created afterwards is a marker: once it is there,
	// the earlier ones would have been too.
	mine, err := c.CoreV1().Services(ns).Create(ctx(t), service(ns, "mine", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), "mine", metav1.DeleteOptions{}) })
	testenv.WaitFor(t, bound, "marker Service", func() bool { return !absent(programmed(t, a.pins), mine) })
	got := programmed(t, a.pins)
	if !absent(got, created[0]) {
		t.Errorf("Service labelled for another proxy was programmed: %s", describe(got))
	}
	for fe, bs := range got {
		for _, b := range bs {
			if b.Addr.String() == "10.244.1.99" {
				t.Errorf("%s has a backend from another proxy's or a headless Service's slice", fe)
			}
		}
	}
	if len(created[2].Spec.ClusterIPs) != 0 {
		t.Errorf("ExternalName Service got ClusterIPs %v", created[2].Spec.ClusterIPs)
	}
}

// TestRestartResyncs: changes made while the agent is down are applied on
// restart against the pinned maps: stale Services removed, changed ones
// updated, unchanged ones untouched.
func TestRestartResyncs(t *testing.T) {
	pins := pinDir(t)
	a := startAgent(t, pins)
	c, ns := env.Client, "default"
	keep, _ := c.CoreV1().Services(ns).Create(ctx(t), service(ns, "keep", nil), metav1.CreateOptions{})
	change, _ := c.CoreV1().Services(ns).Create(ctx(t), service(ns, "change", nil), metav1.CreateOptions{})
	gone, err := c.CoreV1().Services(ns).Create(ctx(t), service(ns, "gone", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"keep", "change", "gone"} {
		t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), s, metav1.DeleteOptions{}) })
		if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), slice(ns, s, s, false, ready("10.244.1.1")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, bound, "three Services", func() bool {
		got := programmed(t, pins)
		return holds(got, expect(keep, []string{"10.244.1.1"}, nil)) && holds(got, expect(gone, []string{"10.244.1.1"}, nil))
	})
	a.stop()

	if err := c.CoreV1().Services(ns).Delete(ctx(t), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx(t), slice(ns, "change", "change", false, ready("10.244.1.2")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !holds(programmed(t, pins), expect(gone, []string{"10.244.1.1"}, nil)) {
		t.Fatal("the datapath did not keep its state while the agent was down")
	}

	startAgent(t, pins)
	got := programmed(t, pins)
	if !absent(got, gone) {
		t.Error("Service deleted while the agent was down is still programmed")
	}
	if !holds(got, expect(change, []string{"10.244.1.2"}, nil)) {
		t.Errorf("changed Service not updated: %s", describe(got))
	}
	if !holds(got, expect(keep, []string{"10.244.1.1"}, nil)) {
		t.Errorf("unchanged Service disturbed: %s", describe(got))
	}
}
