package controlplane

import (
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/source/kube"
)

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const (
	sliceCRD = chart + "/crds/networkslices.yaml"
	poolCRD  = chart + "/crds/networkloadbalancerpools.yaml"
)

func dynClient(t *testing.T) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// installSliceCRD creates the chart's NetworkSlice CRD, waits until it is
// served, and deletes it (waiting until it is gone) when the test ends.
func installSliceCRD(t *testing.T) {
	t.Helper()
	name := installCRD(t, sliceCRD, kube.NetworkSlices)
	d := dynClient(t)
	t.Cleanup(func() {
		_ = d.Resource(crds).Delete(ctx(t), name, metav1.DeleteOptions{})
		testenv.WaitFor(t, 30*time.Second, "the NetworkSlice CRD deleted", func() bool {
			_, err := d.Resource(crds).Get(ctx(t), name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})
}

// installPoolCRD creates the chart's NetworkLoadBalancerPool CRD and
// waits until it is served; it stays (the agents run with or without it).
func installPoolCRD(t *testing.T) { installCRD(t, poolCRD, kube.NetworkLoadBalancerPools) }

// installCRD creates the CRD of the chart's file (if it is not there yet)
// and waits until its resource is served; it returns the CRD's name.
func installCRD(t *testing.T, file string, served schema.GroupVersionResource) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal(b, &crd.Object); err != nil {
		t.Fatal(err)
	}
	d := dynClient(t)
	if _, err := d.Resource(crds).Create(ctx(t), &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, served.Resource+" served", func() bool {
		_, err := d.Resource(served).List(ctx(t), metav1.ListOptions{})
		return err == nil
	})
	return crd.GetName()
}

// lbPool is a NetworkLoadBalancerPool of cidrs (quoted, comma-separated).
func lbPool(t *testing.T, name, cidrs string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := "apiVersion: netcube.io/v1alpha1\nkind: NetworkLoadBalancerPool\nmetadata: {name: " + name + "}\nspec:\n  cidrs: [" + cidrs + "]\n"
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// networkSlice is a NetworkSlice with spec (YAML).
func networkSlice(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := "apiVersion: netcube.io/v1alpha1\nkind: NetworkSlice\nmetadata: {name: " + name + "}\nspec:\n" + spec
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestNetworkSlicesFromTheAPI: NetworkSlices come through the API server
// as the chart's CRD defines them. The agent runs without the CRD (ready,
// nothing failing: no slices), finds it once installed, and places the
// pod a slice selects in it; the API server refuses a slice with an
// unknown class or an unreadable rate, naming the field; a rate of zero,
// which the schema lets through, gets a Warning Event naming the field
// and is not applied; a deleted slice's pod is out of it at once; the CRD
// removed, the slices are gone and the agent is still ready.
func TestNetworkSlicesFromTheAPI(t *testing.T) {
	a := startAgent(t, pinDir(t)) // ready without the CRD
	ns := "slices"
	runningPod(t, ns, "ue", map[string]string{"app": "ue"}, "10.244.0.88")
	series := func(slice string) string {
		return grep(a.get("/metrics", a.metrics), `netcube_slice_pods{class="latency",slice="`+slice+`"}`)
	}
	if log, _ := os.ReadFile(a.log); !strings.Contains(string(log), "CRD is not installed") {
		t.Errorf("the agent does not say the NetworkSlice CRD is missing:\n%s", log)
	}

	installSliceCRD(t)
	d := dynClient(t).Resource(kube.NetworkSlices)
	// Positive control: a valid slice reaches the agent (found within its
	// 10 s retry) and holds the pod.
	if _, err := d.Create(ctx(t), networkSlice(t, "urllc", "  class: latency\n  podSelector: {matchLabels: {app: ue}}\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the pod in slice urllc", func() bool { return strings.HasSuffix(series("urllc"), " 1") })

	for _, bad := range []struct{ spec, field string }{
		{"  class: fast\n", "spec.class"},
		{"  egressRate: fast\n", "spec.egressRate"},
		{"  dscp: 64\n", "spec.dscp"},
	} {
		_, err := d.Create(ctx(t), networkSlice(t, "refused", bad.spec), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("creating a NetworkSlice with %q: %v, want an error naming %s", bad.spec, err, bad.field)
		}
	}
	if _, err := d.Create(ctx(t), networkSlice(t, "zero", "  class: latency\n  egressRate: \"0\"\n  podSelector: {matchLabels: {app: ue}}\n  precedence: 10\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if msg := eventFor(t, "default", "NetworkSlice", "zero", "InvalidField"); !strings.Contains(msg, "spec.egressRate") {
		t.Errorf("event %q does not name spec.egressRate", msg)
	}
	if s := series("zero"); s != "" {
		t.Errorf("an invalid slice is applied: %s", s)
	}
	if s := series("urllc"); !strings.HasSuffix(s, " 1") {
		t.Errorf("the invalid slice (of higher precedence) took the pod: %q", s)
	}

	if err := d.Delete(ctx(t), "urllc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "slice urllc gone", func() bool { return series("urllc") == "" })

	// The CRD removed: no slices, the agent still ready.
	if _, err := d.Create(ctx(t), networkSlice(t, "embb", "  class: latency\n  podSelector: {matchLabels: {app: ue}}\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the pod in slice embb", func() bool { return strings.HasSuffix(series("embb"), " 1") })
	if err := dynClient(t).Resource(crds).Delete(ctx(t), "networkslices.netcube.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "slice embb gone with its CRD", func() bool { return series("embb") == "" })
	if got := a.get("/readyz", a.healthz); got != "ok" {
		t.Errorf("/readyz with the CRD removed: %q", got)
	}
	log, _ := os.ReadFile(a.log)
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "API request failed") && strings.Contains(l, "networkslices") {
			t.Errorf("a missing NetworkSlice CRD counts as a failing API server: %s", l)
		}
	}
}
