package yamldir

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
)

// policyRecorder records pods, namespaces and policies too.
type policyRecorder struct{ *recorder }

func (r policyRecorder) OnPod(k types.NamespacedName, p *model.Pod) {
	if p == nil {
		r.add("delete Pod " + k.String())
		return
	}
	var ports []string
	for _, np := range p.Ports {
		ports = append(ports, fmt.Sprintf("%s=%d", np.Name, np.Port))
	}
	r.add(fmt.Sprintf("Pod %s %v %v %v", k, p.IPs, p.Labels, ports))
}

func (r policyRecorder) OnNamespace(name string, ns *model.Namespace) {
	if ns == nil {
		r.add("delete Namespace " + name)
		return
	}
	r.add(fmt.Sprintf("Namespace %s %v", name, ns.Labels))
}

func (r policyRecorder) OnPolicy(k types.NamespacedName, p *model.Policy) {
	if p == nil {
		r.add("delete NetworkPolicy " + k.String())
		return
	}
	r.add(fmt.Sprintf("NetworkPolicy %s pods=%q ingress=%d egress=%d", k, p.Pods.String(), len(p.Ingress), len(p.Egress)))
}

func (r policyRecorder) OnPoliciesSynced()                     { r.add("policies synced") }
func (r policyRecorder) PodKeys() []types.NamespacedName       { return nil }
func (r policyRecorder) NamespaceKeys() []types.NamespacedName { return nil }
func (r policyRecorder) PolicyKeys() []types.NamespacedName    { return nil }

const podYAML = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  nodeName: node1
  containers: [{name: c, image: x, ports: [{name: http, containerPort: 8080}]}]
status:
  podIPs: [{ip: 10.244.1.5}, {ip: "fd00:10:244:1::5"}]
`

const nsYAML = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {team: a}}\n"

func policyYAML(name, from string) string {
	return `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: ` + name + `, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [` + from + `]
    ports: [{port: http}]
`
}

// TestPoliciesPodsAndNamespaces: a handler enforcing NetworkPolicy gets
// the directory's pods (addresses, labels, named ports), namespaces and
// policies, each change alone; an invalid policy applies without what it
// cannot read (it fails closed), named in the error; a policy whose pod
// selector cannot be read keeps its last version.
func TestPoliciesPodsAndNamespaces(t *testing.T) {
	h := startPolicies(t, map[string]string{
		"pods.yaml":   nsYAML + "---\n" + podYAML,
		"policy.yaml": policyYAML("web", "{podSelector: {matchLabels: {app: shop}}}"),
	})
	h.expect("Namespace shop map[team:a]", "Pod shop/web [10.244.1.5 fd00:10:244:1::5] map[app:web] [http=8080]",
		`NetworkPolicy shop/web pods="app=web" ingress=1 egress=0`, "synced", "policies synced")

	// A label change delivers the pod alone.
	h.write("pods.yaml", nsYAML+"---\n"+strings.Replace(podYAML, "app: web}", "app: web, tier: front}", 1))
	h.expect("Pod shop/web [10.244.1.5 fd00:10:244:1::5] map[app:web tier:front] [http=8080]")

	// An invalid CIDR in one peer: named, and the rule keeps its valid
	// peer only: what is enforced does not change.
	h.write("policy.yaml", policyYAML("web", "{podSelector: {matchLabels: {app: shop}}}, {ipBlock: {cidr: 10.0.0.0/33}}"))
	h.expectError("policy.yaml", "NetworkPolicy shop/web", "spec.ingress[0].from[1].ipBlock.cidr", "applied without the fields named")
	h.expect()

	// Every peer invalid: the rule allows nothing, and is left out; the
	// policy still isolates its pods.
	h.write("policy.yaml", policyYAML("web", "{ipBlock: {cidr: 10.0.0.0/8, except: [192.168.0.0/16]}}"))
	h.expectError("policy.yaml", "NetworkPolicy shop/web", "except", "the rule allows nothing")
	h.expect(`NetworkPolicy shop/web pods="app=web" ingress=0 egress=0`)

	// An unreadable pod selector: the last version stays.
	h.write("policy.yaml", strings.Replace(policyYAML("web", "{podSelector: {}}"), "matchLabels: {app: web}", "matchExpressions: [{key: app, operator: Bogus}]", 1))
	h.expectError("policy.yaml", "NetworkPolicy shop/web", "spec.podSelector", "keeping its last valid version")
	h.expect()

	// Removing the files deletes everything they defined.
	h.write("policy.yaml", "")
	h.expect("delete NetworkPolicy shop/web")
	h.write("pods.yaml", "")
	h.expect("delete Namespace shop", "delete Pod shop/web")
}

// TestPoliciesNeedAPolicyHandler: a handler that does not enforce
// NetworkPolicy gets none of it, and nothing is reported as unread.
func TestPoliciesNeedAPolicyHandler(t *testing.T) {
	h := start(t, map[string]string{"pods.yaml": nsYAML + "---\n" + podYAML + "---\n" + svcYAML("a", "10.96.0.1")})
	h.expect("Service default/a 10.96.0.1", "synced")
	select {
	case err := <-h.errs:
		t.Fatalf("reported: %v", err)
	default:
	}
}
