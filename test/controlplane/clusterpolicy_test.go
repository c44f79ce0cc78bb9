package controlplane

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source/kube"
)

func clusterNetworkPolicy(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(spec), &u.Object); err != nil {
		t.Fatal(err)
	}
	return &u
}

// TestClusterNetworkPoliciesFromTheAPI: the agent is ready without the
// ClusterNetworkPolicy CRD (and says it once, not as an error); with the
// chart's CRD installed, an Admin Deny from the API server is enforced in
// the maps for the pod it selects (a port it does not name still
// passes), two policies at one tier and priority with different actions
// get an Event each naming the other, and a policy deleted is enforced no
// more.
func TestClusterNetworkPoliciesFromTheAPI(t *testing.T) {
	pins := pinDir(t)
	a := startAgent(t, pins) // ready without the CRD
	if log, _ := os.ReadFile(a.log); !strings.Contains(string(log), "clusternetworkpolicies") || strings.Contains(string(log), "level=ERROR") {
		t.Errorf("without the CRD: want one line naming clusternetworkpolicies, no error:\n%s", log)
	}
	ns := "cnp-api"
	runningPod(t, ns, "web", map[string]string{"app": "web"}, "10.244.0.91")
	runningPodOn(t, ns, "client", "node2", map[string]string{"app": "client"}, "10.244.1.91")
	web, client := netip.MustParseAddr("10.244.0.91"), netip.MustParseAddr("10.244.1.91")
	allows := func(port uint16) bool {
		maps, closeMaps, err := datapath.OpenPinned(pins)
		if err != nil {
			t.Fatal(err)
		}
		defer closeMaps()
		ok, err := policy.MapsAllow(maps, client, web, model.TCP, port)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !allows(80) {
		t.Fatal("no policy: client -> web:80 denied") // the positive control
	}
	name := installCRD(t, cnpCRD, kube.ClusterNetworkPolicies)
	t.Cleanup(func() { _ = dynClient(t).Resource(crds).Delete(ctx(t), name, metav1.DeleteOptions{}) })
	res := dynClient(t).Resource(kube.ClusterNetworkPolicies)
	deny := clusterNetworkPolicy(t, `
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: deny-client}
spec:
  tier: Admin
  priority: 10
  subject:
    pods:
      namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: cnp-api}}
      podSelector: {matchLabels: {app: web}}
  ingress:
  - name: no-client-on-80
    action: Deny
    from:
    - pods:
        namespaceSelector: {}
        podSelector: {matchLabels: {app: client}}
    protocols:
    - tcp: {destinationPort: {number: 80}}
`)
	if _, err := res.Create(ctx(t), deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Delete(ctx(t), "deny-client", metav1.DeleteOptions{}) })
	testenv.WaitFor(t, 20*time.Second, "the Admin Deny enforced", func() bool { return !allows(80) })
	if !allows(8080) {
		t.Error("a Deny of port 80 denies 8080 too")
	}

	// The same tier and priority, another action, the same pod.
	accept := clusterNetworkPolicy(t, strings.NewReplacer("deny-client", "accept-client", "Deny", "Accept", "no-client-on-80", "client-on-80").Replace(`
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: deny-client}
spec:
  tier: Admin
  priority: 10
  subject:
    namespaces: {matchLabels: {kubernetes.io/metadata.name: cnp-api}}
  ingress:
  - name: no-client-on-80
    action: Deny
    from:
    - namespaces: {}
`))
	if _, err := res.Create(ctx(t), accept, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Delete(ctx(t), "accept-client", metav1.DeleteOptions{}) })
	for self, other := range map[string]string{"deny-client": "accept-client", "accept-client": "deny-client"} {
		if msg := eventFor(t, "default", "ClusterNetworkPolicy", self, "TierConflict"); !strings.Contains(msg, other) {
			t.Errorf("TierConflict Event on %s does not name %s: %q", self, other, msg)
		}
	}
	// By name, accept-client is first: the client is in.
	testenv.WaitFor(t, 20*time.Second, "accept-client (first by name) decides", func() bool { return allows(80) })

	if err := res.Delete(ctx(t), "accept-client", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "accept-client deleted: the Deny again", func() bool { return !allows(80) })
	if err := res.Delete(ctx(t), "deny-client", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "deny-client deleted: nothing denied", func() bool { return allows(80) && allows(8080) })
	if got := a.get("/readyz", a.healthz); got != "ok" {
		t.Errorf("/readyz: %q", got)
	}
}
