package controlplane

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
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
	if h := a.get("/healthz", a.healthz); !strings.Contains(h, `"lastUpdated": "20`) || !strings.Contains(h, `"currentTime"`) {
		t.Errorf("/healthz is not kube-proxy's shape with a sync time: %q", h)
	}
	if mode := a.get("/proxyMode", a.metrics); mode != "netcube" {
		t.Errorf("/proxyMode %q", mode)
	}
}

// TestServicesNotOurs: Services of another proxy, headless and ExternalName
// Services (even with an external IP) are never programmed, and a Service
// turned into an ExternalName one leaves the maps.
func TestServicesNotOurs(t *testing.T) {
	a := startAgent(t, pinDir(t))
	c, ns := env.Client, "default"
	other := service(ns, "other-proxy", map[string]string{kube.LabelServiceProxyName: "someone-else"})
	headless := service(ns, "headless", nil)
	headless.Spec.ClusterIP, headless.Spec.IPFamilyPolicy = corev1.ClusterIPNone, nil
	external := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "external", Namespace: ns},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com", ExternalIPs: []string{"192.0.2.77"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	var created []*corev1.Service // other-proxy, headless, external
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
	for fe := range got {
		if fe.Addr.String() == "192.0.2.77" {
			t.Errorf("the ExternalName Service's external IP was programmed: %s", fe)
		}
	}

	// A programmed Service turned into an ExternalName one leaves the maps.
	turned, err := c.CoreV1().Services(ns).Create(ctx(t), service(ns, "turned", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), "turned", metav1.DeleteOptions{}) })
	testenv.WaitFor(t, bound, "the Service programmed", func() bool { return !absent(programmed(t, a.pins), turned) })
	update := turned.DeepCopy()
	update.Spec.Type, update.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	update.Spec.ClusterIP, update.Spec.ClusterIPs, update.Spec.IPFamilies, update.Spec.IPFamilyPolicy = "", nil, nil, nil
	if _, err := c.CoreV1().Services(ns).Update(ctx(t), update, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "the Service, now ExternalName, gone from the maps", func() bool { return absent(programmed(t, a.pins), turned) })
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

// TestLBAlgorithmFlag: with --lb-algorithm maglev, a Service without the
// annotation is programmed for Maglev, and one annotated random is not.
func TestLBAlgorithmFlag(t *testing.T) {
	a := startAgent(t, pinDir(t), "--lb-algorithm", "maglev")
	c, ns := env.Client, "default"
	plain := service(ns, "algo-default", nil)
	random := service(ns, "algo-random", nil)
	random.Annotations = map[string]string{k8s.AnnotationAlgorithm: "random"}
	var created []*corev1.Service
	for _, s := range []*corev1.Service{plain, random} {
		got, err := c.CoreV1().Services(ns).Create(ctx(t), s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, got)
		t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), s.Name, metav1.DeleteOptions{}) })
	}
	maglev := func(svc *corev1.Service) (on, ok bool) {
		maps, closeMaps, err := datapath.OpenPinned(a.pins)
		if err != nil {
			t.Fatal(err)
		}
		defer closeMaps()
		f, ok := lb.Flags(maps, model.Frontend{Addr: netip.MustParseAddr(svc.Spec.ClusterIPs[0]), Port: 80, Proto: model.TCP})
		return f&model.Maglev != 0, ok
	}
	testenv.WaitFor(t, bound, "both Services programmed", func() bool {
		_, a := maglev(created[0])
		_, b := maglev(created[1])
		return a && b
	})
	if on, _ := maglev(created[0]); !on {
		t.Error("a Service without the annotation is not Maglev under --lb-algorithm maglev")
	}
	if on, _ := maglev(created[1]); on {
		t.Error("a Service annotated random is Maglev")
	}
}

// TestRelistAfterWatchExpiry: the API server goes away while a Service is
// deleted and etcd's history is compacted, so the agent's watch cannot
// resume when it comes back ("resource version too old"): the agent lists
// again, removes the Service the new list lacks and keeps the others.
func TestRelistAfterWatchExpiry(t *testing.T) {
	a := startAgent(t, pinDir(t))
	c, ns := env.Client, "default"
	var svcs []*corev1.Service
	for _, name := range []string{"relist-keep", "relist-gone"} {
		s, err := c.CoreV1().Services(ns).Create(ctx(t), service(ns, name, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, s)
		t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), name, metav1.DeleteOptions{}) })
	}
	keep, gone := svcs[0], svcs[1]
	testenv.WaitFor(t, bound, "both Services programmed", func() bool {
		got := programmed(t, a.pins)
		return !absent(got, keep) && !absent(got, gone)
	})
	err := env.RestartAPIServer(func() error {
		if err := env.DeleteDirect(ctx(t), corev1.Resource("services"), ns, "relist-gone"); err != nil {
			return err
		}
		return env.Compact(ctx(t))
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 60*time.Second, "the Service deleted while the watch was down removed", func() bool {
		return absent(programmed(t, a.pins), gone)
	})
	if absent(programmed(t, a.pins), keep) {
		t.Error("the Service still there was removed too")
	}
	log, _ := os.ReadFile(a.log)
	if !strings.Contains(string(log), "watch expired, relisting") {
		t.Errorf("the agent did not relist after the watch expired:\n%s", log)
	}
}
