package controlplane

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/lab/kubeenv"
	agentcfg "github.com/netcube/netcube/pkg/agent"
	"github.com/netcube/netcube/pkg/lbipam"
	"github.com/netcube/netcube/pkg/source/kube"
)

const chart = "../../deploy/helm/netcube"

// render runs the real helm on the chart with its default values.
func render(t *testing.T) []byte {
	t.Helper()
	tools, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(tools, "helm"), "template", "netcube", chart, "--include-crds").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("helm template: %v\n%s", err, stderr)
	}
	return out
}

func decode(t *testing.T, manifest []byte) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for _, doc := range strings.Split(string(manifest), "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "\n")) == "" || !strings.Contains(doc, "kind:") {
			continue
		}
		if strings.Contains(doc, "kind: CustomResourceDefinition") {
			// Not in client-go's scheme: kept unstructured.
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("decode %q: %v", doc, err)
			}
			objs = append(objs, u)
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decode %q: %v", doc, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// TestDeployManifests: the plain manifests are the chart rendered with its
// defaults; every object passes the real API server's validation and
// admission (server-side dry run); the agent's config parses.
func TestDeployManifests(t *testing.T) {
	rendered := render(t)
	committed, err := os.ReadFile("../../deploy/netcube.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(committed), bytes.TrimSpace(rendered)) {
		t.Error("deploy/netcube.yaml differs from `helm template netcube deploy/helm/netcube --include-crds`: run `make manifests`")
	}
	c := env.Client
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	kinds := map[string]bool{}
	for _, obj := range decode(t, rendered) {
		ctx := context.Background()
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, dry)
		case *corev1.ConfigMap:
			cfg := agentcfg.Defaults()
			if perr := yamlToConfig(o.Data["config.yaml"], &cfg); perr != nil {
				t.Errorf("ConfigMap config.yaml: %v", perr)
			}
			_, err = c.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, dry)
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(ctx, o, dry)
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, dry)
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, dry)
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, dry)
		case *appsv1.DaemonSet:
			_, err = c.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, dry)
		case *unstructured.Unstructured:
			_, err = dynClient(t).Resource(crds).Create(ctx, o, dry)
		default:
			t.Errorf("unexpected object %T in the chart", obj)
			continue
		}
		kinds[obj.GetObjectKind().GroupVersionKind().Kind] = true
		if err != nil {
			t.Errorf("server-side dry run of %T: %v", obj, err)
		}
	}
	for _, k := range []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"} {
		if !kinds[k] {
			t.Errorf("the chart has no %s", k)
		}
	}
}

func yamlToConfig(s string, cfg *agentcfg.Config) error {
	f := filepath.Join(os.TempDir(), "netcube-config-test.yaml")
	if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
		return err
	}
	defer os.Remove(f)
	return agentcfg.LoadFile(f, cfg)
}

// TestRBACIsEnough: with the chart's ServiceAccount, ClusterRole and
// binding created for real, the agent authenticated as that ServiceAccount
// syncs: the role grants what the agent needs.
func TestRBACIsEnough(t *testing.T) {
	c := env.Client
	ctx := context.Background()
	for _, obj := range decode(t, render(t)) {
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	tok, err := c.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "netcube-agent",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.URL, CertificateAuthority: filepath.Join(env.Dir, "ca.crt")}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "sa.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}

	a := startAgent(t, pinDir(t), "--kubeconfig", path) // waits for /readyz
	svc, err := c.CoreV1().Services("default").Create(ctx, service("default", "rbac-probe", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Services("default").Delete(ctx, "rbac-probe", metav1.DeleteOptions{}) })
	testenv.WaitFor(t, bound, "Service seen with the ServiceAccount's rights", func() bool { return !absent(programmed(t, a.pins), svc) })
	// Events: the one thing the agent writes (a slice naming no Service).
	orphan := slice("default", "", "rbac-orphan", false, ready("10.244.9.9"))
	delete(orphan.Labels, discoveryv1.LabelServiceName)
	if _, err := c.DiscoveryV1().EndpointSlices("default").Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.DiscoveryV1().EndpointSlices("default").Delete(ctx, "rbac-orphan", metav1.DeleteOptions{})
	})
	eventFor(t, "default", "EndpointSlice", "rbac-orphan", "InvalidField")
	// ... and on a NetworkPolicy and a Pod (stored past validation, each
	// with a field netcube cannot read).
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac-invalid", Namespace: "default"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "bad"}}}}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rbac-invalid", Namespace: "default"},
		Spec:   corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.244.0.300"}}}}
	if err := env.StoreDirect(ctx, []kubeenv.StoredObject{
		{Resource: networkingv1.Resource("networkpolicies"), Version: networkingv1.SchemeGroupVersion, Object: np},
		{Resource: corev1.Resource("pods"), Version: corev1.SchemeGroupVersion, Object: pod},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.NetworkingV1().NetworkPolicies("default").Delete(ctx, "rbac-invalid", metav1.DeleteOptions{})
		_ = c.CoreV1().Pods("default").Delete(ctx, "rbac-invalid", *metav1.NewDeleteOptions(0))
	})
	eventFor(t, "default", "NetworkPolicy", "rbac-invalid", "InvalidField")
	eventFor(t, "default", "Pod", "rbac-invalid", "InvalidField")
	// ... and on a NetworkSlice, read through the CRD (a rate of zero).
	installSliceCRD(t)
	if _, err := dynClient(t).Resource(kube.NetworkSlices).Create(ctx, networkSlice(t, "rbac-invalid", "  egressRate: \"0\"\n"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventFor(t, "default", "NetworkSlice", "rbac-invalid", "InvalidField")
	// ... and LoadBalancer IPs: the agent takes the Lease, reads the
	// pools, writes a Service's status and its cleanup finalizer, and an
	// Event on a pool that overlaps.
	installPoolCRD(t)
	// (Created in one second, the pools are ordered by name.)
	for _, p := range []struct{ name, cidrs string }{{"rbac-a", `"192.0.2.0/28", "2001:db8::/124"`}, {"rbac-b-overlap", `"192.0.2.0/24"`}} {
		if _, err := dynClient(t).Resource(kube.NetworkLoadBalancerPools).Create(ctx, lbPool(t, p.name, p.cidrs), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = dynClient(t).Resource(kube.NetworkLoadBalancerPools).Delete(ctx, p.name, metav1.DeleteOptions{})
		})
	}
	lbSvc := service("default", "rbac-lb", nil)
	lbSvc.Spec.Type = corev1.ServiceTypeLoadBalancer
	if _, err := c.CoreV1().Services("default").Create(ctx, lbSvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Services("default").Delete(ctx, "rbac-lb", metav1.DeleteOptions{}) })
	testenv.WaitFor(t, 30*time.Second, "a LoadBalancer IP and the cleanup finalizer written with the ServiceAccount's rights", func() bool {
		s, err := c.CoreV1().Services("default").Get(ctx, "rbac-lb", metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) == len(s.Spec.IPFamilies) && slices.Contains(s.Finalizers, lbipam.CleanupFinalizer)
	})
	eventFor(t, "default", "NetworkLoadBalancerPool", "rbac-b-overlap", "PoolConflict")
	// ... and, with --pod-source=nodepods, its node's NodePods (owned by
	// the Node, whose UID it reads), from the node's pods alone.
	installCRD(t, nodePodsCRD, kube.NodePodsResource)
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "rbac-node"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoreV1().Nodes().Delete(ctx, "rbac-node", metav1.DeleteOptions{})
		_ = dynClient(t).Resource(kube.NodePodsResource).Delete(ctx, "rbac-node", metav1.DeleteOptions{})
	})
	hdir, _ := hollowDir(t)
	h := startHollow(t, hdir, path, "rbac-node", nil, "--pod-source=nodepods")
	testenv.WaitFor(t, 10*time.Second, "NodePods rbac-node written with the ServiceAccount's rights", func() bool {
		_, err := dynClient(t).Resource(kube.NodePodsResource).Get(ctx, "rbac-node", metav1.GetOptions{})
		return err == nil
	})
	for _, l := range []string{a.log, h.log} {
		log, _ := os.ReadFile(l)
		if bytes.Contains(log, []byte("forbidden")) {
			t.Errorf("agent was denied something:\n%s", log)
		}
	}
}

// TestDaemonSetIsLockedDown: the agent's container is not privileged,
// cannot gain privileges, has a read-only root filesystem, and keeps only
// the capabilities it needs (BPF, NET_ADMIN, SYS_ADMIN); its token may
// list and watch what it reads, get only the kinds it writes Events on
// (for their UID), create Events, patch what LoadBalancer IPs need,
// apply NodePods and get Nodes (their UID, the NodePods' owner), and
// nothing else. (The real-node tests run the agent so.)
func TestDaemonSetIsLockedDown(t *testing.T) {
	var ds *appsv1.DaemonSet
	var role *rbacv1.ClusterRole
	for _, obj := range decode(t, render(t)) {
		switch o := obj.(type) {
		case *appsv1.DaemonSet:
			ds = o
		case *rbacv1.ClusterRole:
			role = o
		}
	}
	if ds == nil || role == nil {
		t.Fatal("the chart renders no DaemonSet or no ClusterRole")
	}
	for _, c := range append(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Fatalf("container %s: no securityContext", c.Name)
		}
		if sc.Privileged == nil || *sc.Privileged {
			t.Errorf("container %s: privileged", c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s: may gain privileges", c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: writable root filesystem", c.Name)
		}
		caps := sc.Capabilities
		if caps == nil || !slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container %s: does not drop every capability: %+v", c.Name, caps)
		} else if got := slices.Sorted(slices.Values(caps.Add)); !slices.Equal(got, []corev1.Capability{"BPF", "NET_ADMIN", "SYS_ADMIN"}) {
			t.Errorf("container %s: adds %v, want only BPF, NET_ADMIN, SYS_ADMIN", c.Name, got)
		}
	}
	reads := map[string]bool{"services": true, "nodes": true, "pods": true, "namespaces": true, "endpointslices": true, "networkpolicies": true,
		"networkslices": true, "networkloadbalancerpools": true, "nodepods": true}
	eventTargets := map[string]bool{"services": true, "endpointslices": true, "pods": true, "networkpolicies": true, "networkslices": true,
		"networkloadbalancerpools": true, "nodepods": true}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			for _, verb := range r.Verbs {
				ok := (verb == "list" || verb == "watch") && reads[res] ||
					verb == "get" && eventTargets[res] ||
					verb == "create" && res == "events" ||
					// LoadBalancer IPs: the status, and the cleanup finalizer.
					verb == "patch" && (res == "services/status" || res == "services") ||
					// --pod-source=nodepods: its node's NodePods, applied,
					// owned by the Node (its UID).
					(verb == "create" || verb == "patch") && res == "nodepods" ||
					verb == "get" && res == "nodes"
				if !ok {
					t.Errorf("the agent's ClusterRole grants %s on %s", verb, res)
				}
			}
		}
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("unexpected rule %+v", r)
		}
	}
}
