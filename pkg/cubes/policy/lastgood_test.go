package policy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/pkg/cube/cubetest"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// readCNP reads a ClusterNetworkPolicy as the kube source does, at
// resourceVersion rv; name and tier Admin come first, spec follows.
func readCNP(t *testing.T, name, rv, spec string) *model.ClusterPolicy {
	t.Helper()
	var api cnpv1.ClusterNetworkPolicy
	if err := yaml.UnmarshalStrict([]byte("metadata: {name: "+name+", resourceVersion: \""+rv+"\"}\nspec:\n"+spec), &api); err != nil {
		t.Fatal(err)
	}
	return k8s.ReadClusterPolicy(&api)
}

const (
	webSubject = `
  tier: Admin
  priority: 10
  subject:
    pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: web}}}
`
	// A selector the CRD's schema lets through and labels cannot read.
	brokenPeer = `{pods: {namespaceSelector: {}, podSelector: {matchExpressions: [{key: app, operator: In, values: []}]}}}`
	clientPeer = `{pods: {namespaceSelector: {}, podSelector: {matchLabels: {app: client}}}}`
)

// TestClusterPolicyKeepsLastGood: an update that cannot be read whole is
// not applied in part: the last good version is enforced whole (the
// update's readable Accept would open port 80), reported on the policy
// and in PoliciesNotApplied with both versions; a good update replaces it
// and clears the report, as a deletion does. A new policy that cannot be
// read whole has no good version: enforced failing closed (a Deny of a
// peer that cannot be read denies everyone), reported; one whose subject
// cannot be read is not enforced, and an update breaking the subject of a
// good one keeps the good one.
func TestClusterPolicyKeepsLastGood(t *testing.T) {
	fake := cubetest.New(t, nil, policy.Cube{})
	r := policy.NewReconciler(fake.Maps, "node1", nil)
	rep := &reports{msgs: map[string]string{}}
	rr := &report.Reporter{Sink: rep}
	r.SetReporter(rr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)
	web := pod("x", "web", "node1", "10.244.1.5", map[string]string{"app": "web"})
	client := pod("x", "client", "node2", "10.244.2.6", map[string]string{"app": "client"})
	for _, p := range []*model.Pod{web, client} {
		r.OnPod(types.NamespacedName{Namespace: "x", Name: p.ID.Name}, p)
	}
	r.OnNamespace("x", &model.Namespace{Name: "x"})
	r.OnPoliciesSynced()
	allows := func(port uint16) bool {
		ok, err := policy.MapsAllow(fake.Maps, client.IPs[0], web.IPs[0], model.TCP, port)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// waitFor waits for the maps to say want for ports 80 and 8080, and
	// a moment more (a pass not yet run would change them).
	waitFor := func(what string, want80, want8080 bool) {
		t.Helper()
		eventually(t, what, func() bool { return allows(80) == want80 && allows(8080) == want8080 })
		time.Sleep(30 * time.Millisecond)
		if allows(80) != want80 || allows(8080) != want8080 {
			t.Fatalf("%s: then 80 %v, 8080 %v", what, allows(80), allows(8080))
		}
	}
	const key = "ClusterNetworkPolicy deny-client " + string(report.InvalidField)
	notApplied := func(name string) string { return r.PoliciesNotApplied()["ClusterNetworkPolicy "+name] }
	waitFor("no policy: client -> web allowed (the positive control)", true, true)

	r.OnClusterPolicy("deny-client", readCNP(t, "deny-client", "1", webSubject+`
  ingress:
  - {name: no-client-on-80, action: Deny, from: [`+clientPeer+`], protocols: [{tcp: {destinationPort: {number: 80}}}]}
`))
	waitFor("the Deny of 80", false, true)

	// Read as far as it can be, this update accepts the client on 80.
	r.OnClusterPolicy("deny-client", readCNP(t, "deny-client", "2", webSubject+`
  ingress:
  - {name: client-on-80, action: Accept, from: [`+clientPeer+`], protocols: [{tcp: {destinationPort: {number: 80}}}]}
  - {name: broken, action: Accept, from: [`+brokenPeer+`]}
`))
	waitFor("the broken update: the last good version still denies 80", false, true)
	for what, msg := range map[string]string{"the Event": rep.get(key), "the status": notApplied("deny-client")} {
		for _, want := range []string{"spec.ingress[1].from[0].pods.podSelector", "update (resourceVersion 2) not applied", "enforcing the last good version (resourceVersion 1)"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q lacks %q", what, msg, want)
			}
		}
	}
	// A broken subject keeps the good version too.
	r.OnClusterPolicy("deny-client", readCNP(t, "deny-client", "3", `
  tier: Admin
  priority: 10
  subject: {namespaces: {matchExpressions: [{key: a, operator: Bogus}]}}
  ingress:
  - {action: Accept, from: [`+clientPeer+`]}
`))
	waitFor("a broken subject: the last good version still denies 80", false, true)
	if msg := notApplied("deny-client"); !strings.Contains(msg, "spec.subject.namespaces") || !strings.Contains(msg, "last good version (resourceVersion 1)") {
		t.Errorf("a broken subject: %q", msg)
	}

	r.OnClusterPolicy("deny-client", readCNP(t, "deny-client", "4", webSubject+`
  ingress:
  - {name: no-client-on-8080, action: Deny, from: [`+clientPeer+`], protocols: [{tcp: {destinationPort: {number: 8080}}}]}
`))
	waitFor("a good update applies", true, false)
	if notApplied("deny-client") != "" || rr.Count()[report.InvalidField] != 0 {
		t.Errorf("a good update: still reported %q, %v", notApplied("deny-client"), rr.Count())
	}

	r.OnClusterPolicy("deny-client", readCNP(t, "deny-client", "5", webSubject+`
  ingress:
  - {action: Accept, from: [`+brokenPeer+`]}
`))
	waitFor("broken again: the last good version (4) holds", true, false)
	if !strings.Contains(notApplied("deny-client"), "last good version (resourceVersion 4)") {
		t.Errorf("broken again: %q", notApplied("deny-client"))
	}
	r.OnClusterPolicy("deny-client", nil)
	waitFor("deleted", true, true)
	if len(r.PoliciesNotApplied()) != 0 || rr.Count()[report.InvalidField] != 0 {
		t.Errorf("deleted: still reported %v, %v", r.PoliciesNotApplied(), rr.Count())
	}

	// New and broken: nothing good to keep, failing closed.
	r.OnClusterPolicy("new-bad", readCNP(t, "new-bad", "6", webSubject+`
  ingress:
  - {action: Deny, from: [`+brokenPeer+`], protocols: [{tcp: {destinationPort: {number: 80}}}]}
`))
	waitFor("a new broken Deny fails closed: everyone denied", false, false)
	if msg := notApplied("new-bad"); !strings.Contains(msg, "failing closed") || !strings.Contains(msg, "spec.ingress[0]") {
		t.Errorf("a new broken policy: %q", msg)
	}
	if rep.get("ClusterNetworkPolicy new-bad "+string(report.InvalidField)) == "" {
		t.Error("a new broken policy: no Event")
	}
	r.OnClusterPolicy("new-bad", nil)
	waitFor("the new broken one deleted", true, true)

	r.OnClusterPolicy("bad-subject", readCNP(t, "bad-subject", "7", `
  tier: Admin
  priority: 10
  subject: {namespaces: {matchExpressions: [{key: a, operator: In}]}}
  ingress:
  - {action: Deny, from: [`+clientPeer+`]}
`))
	if msg := notApplied("bad-subject"); !strings.Contains(msg, "not applied") {
		t.Errorf("a new policy whose subject cannot be read: %q", msg)
	}
	waitFor("a new policy whose subject cannot be read enforces nothing", true, true)
	if keys := r.ClusterPolicyKeys(); len(keys) != 1 || keys[0] != "bad-subject" {
		t.Errorf("ClusterPolicyKeys %v: want the one not applied (a relist must find it deleted)", keys)
	}
	r.OnClusterPolicy("bad-subject", nil)
	if len(r.PoliciesNotApplied()) != 0 || rr.Count()[report.InvalidField] != 0 {
		t.Errorf("all deleted: still reported %v, %v", r.PoliciesNotApplied(), rr.Count())
	}
}
