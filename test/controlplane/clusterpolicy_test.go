package controlplane

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/localapi"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source/kube"
)

// installCNPCRD installs the chart's ClusterNetworkPolicy CRD for the
// test, and deletes it when the test ends (waited for: the next test may
// start without it).
func installCNPCRD(t *testing.T) {
	t.Helper()
	d := dynClient(t).Resource(crds)
	gone := func() bool {
		_, err := d.Get(context.Background(), "clusternetworkpolicies.policy.networking.k8s.io", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	testenv.WaitFor(t, 30*time.Second, "an earlier test's CRD deleted, if it was being deleted", func() bool {
		crd, err := d.Get(context.Background(), "clusternetworkpolicies.policy.networking.k8s.io", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && crd.GetDeletionTimestamp() == nil
	})
	name := installCRD(t, cnpCRD, kube.ClusterNetworkPolicies)
	t.Cleanup(func() {
		_ = d.Delete(context.Background(), name, metav1.DeleteOptions{})
		testenv.WaitFor(t, 30*time.Second, "the ClusterNetworkPolicy CRD deleted", gone)
	})
}

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
	installCNPCRD(t)
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

// TestClusterNetworkPolicyBadInput: a broken update is never applied in
// part. A ClusterNetworkPolicy denies client -> web:80 (allowed before
// it: the positive control). Updates the CRD's schema catches (a CIDR, a
// priority out of range, an unknown action or tier, a port name and
// number together) are refused by the API server: the policy stays at
// its version. An update the schema lets through and netcube cannot read
// (an In expression without values) would, read as far as it can be,
// accept the client on 80: the traffic stays denied, an InvalidField
// Event names the field and says the last good version is kept, and so
// do the status endpoint and `netcube status`. A good update then
// applies, and the report is cleared.
func TestClusterNetworkPolicyBadInput(t *testing.T) {
	pins := pinDir(t)
	socket := filepath.Join(t.TempDir(), "agent.sock")
	a := startAgent(t, pins, "--api-socket", socket)
	ns := "cnp-bad"
	runningPod(t, ns, "web", map[string]string{"app": "web"}, "10.244.0.92")
	runningPodOn(t, ns, "client", "node2", map[string]string{"app": "client"}, "10.244.1.92")
	web, client := netip.MustParseAddr("10.244.0.92"), netip.MustParseAddr("10.244.1.92")
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
	testenv.WaitFor(t, 20*time.Second, "no policy: client -> web:80 allowed (the positive control)", func() bool { return allows(80) })
	installCNPCRD(t)
	res := dynClient(t).Resource(kube.ClusterNetworkPolicies)
	const head = `
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata: {name: deny-web}
spec:
  tier: Admin
  priority: 10
  subject:
    pods:
      namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: cnp-bad}}
      podSelector: {matchLabels: {app: web}}
`
	const client80 = `
    from:
    - pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: client}}}
    protocols:
    - tcp: {destinationPort: {number: 80}}
`
	created, err := res.Create(ctx(t), clusterNetworkPolicy(t, head+"  ingress:\n  - name: no-client-on-80\n    action: Deny"+client80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Delete(context.Background(), "deny-web", metav1.DeleteOptions{}) })
	testenv.WaitFor(t, 20*time.Second, "the Deny enforced", func() bool { return !allows(80) })
	good := created.GetResourceVersion()

	// update replaces the spec with the one of doc (head and rules).
	update := func(doc string) (*unstructured.Unstructured, error) {
		cur, err := res.Get(ctx(t), "deny-web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Object["spec"] = clusterNetworkPolicy(t, doc).Object["spec"]
		return res.Update(ctx(t), cur, metav1.UpdateOptions{})
	}
	for what, doc := range map[string]string{
		"an invalid CIDR":         head + "  egress:\n  - {action: Deny, to: [{networks: [10.0.0.0/33]}]}\n",
		"a priority out of range": strings.Replace(head, "priority: 10", "priority: 1001", 1) + "  ingress:\n  - action: Deny" + client80,
		"an unknown action":       head + "  ingress:\n  - action: Allow" + client80,
		"an unknown tier":         strings.Replace(head, "tier: Admin", "tier: Middle", 1) + "  ingress:\n  - action: Deny" + client80,
		"a port name and number together": head + "  ingress:\n  - action: Deny" +
			strings.Replace(client80, "tcp: {destinationPort: {number: 80}}", "{tcp: {destinationPort: {number: 80}}, destinationNamedPort: http}", 1),
	} {
		if _, err := update(doc); !apierrors.IsInvalid(err) {
			t.Errorf("%s: the API server answered %v, want it refused as invalid", what, err)
		}
	}
	if cur, err := res.Get(ctx(t), "deny-web", metav1.GetOptions{}); err != nil || cur.GetResourceVersion() != good {
		t.Fatalf("after the refused updates: %v, resourceVersion %s, want %s", err, cur.GetResourceVersion(), good)
	}

	// Past the schema: the client accepted on 80, and a rule netcube
	// cannot read.
	broken, err := update(head + "  ingress:\n  - name: client-on-80\n    action: Accept" + client80 + `
  - name: unreadable
    action: Accept
    from:
    - pods: {namespaceSelector: {}, podSelector: {matchExpressions: [{key: app, operator: In, values: []}]}}
`)
	if err != nil {
		t.Fatalf("the update the schema lets through: %v", err)
	}
	msg := eventFor(t, "default", "ClusterNetworkPolicy", "deny-web", "InvalidField")
	for _, want := range []string{"spec.ingress[1].from[0].pods.podSelector", "update (resourceVersion " + broken.GetResourceVersion() + ") not applied",
		"enforcing the last good version (resourceVersion " + good + ")"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the InvalidField Event %q lacks %q", msg, want)
		}
	}
	time.Sleep(time.Second) // what a pass would have written by now
	if allows(80) {
		t.Fatal("the broken update opened client -> web:80")
	}
	status := func() localapi.Status {
		var st localapi.Status
		if err := json.Unmarshal([]byte(unixGet(socket, localapi.StatusPath)), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if got := status().NotApplied["ClusterNetworkPolicy deny-web"]; !strings.Contains(got, "enforcing the last good version (resourceVersion "+good+")") {
		t.Errorf("status not_applied: %q", got)
	}
	out, err := exec.Command(filepath.Join(binDir, "netcube"), "status", "--socket", socket, "--bpf-root", pins).CombinedOutput()
	if want := "policy: ClusterNetworkPolicy deny-web: update (resourceVersion " + broken.GetResourceVersion() + ") not applied"; err != nil || !strings.Contains(string(out), want) {
		t.Errorf("netcube status (%v) lacks %q:\n%s", err, want, out)
	}
	if got := a.get("/readyz", a.healthz); got != "ok" {
		t.Errorf("/readyz with a policy not applied: %q (the policy's author has the Event; the node is fine)", got)
	}

	// A good update applies: 80 open, 8080 denied, nothing reported.
	if _, err := update(head + "  ingress:\n  - name: no-client-on-8080\n    action: Deny" + strings.Replace(client80, "80}", "8080}", 1)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the good update applied", func() bool { return allows(80) && !allows(8080) })
	testenv.WaitFor(t, 5*time.Second, "the status cleared", func() bool { return len(status().NotApplied) == 0 })
}
