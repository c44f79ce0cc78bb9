package controlplane

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/lab/kubeenv"
	agentcfg "github.com/netcube/netcube/pkg/agent"
	"github.com/netcube/netcube/pkg/lbipam"
	"github.com/netcube/netcube/pkg/model"
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
		case *appsv1.Deployment:
			_, err = c.AppsV1().Deployments(o.Namespace).Create(ctx, o, dry)
		case *coordinationv1.Lease:
			_, err = c.CoordinationV1().Leases(o.Namespace).Create(ctx, o, dry)
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, dry)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, dry)
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
	for _, k := range []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet",
		"Deployment", "Lease", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
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

// TestRBACIsEnough: with the chart's ServiceAccounts, roles, bindings and
// Lease created for real, the agent authenticated as its ServiceAccount
// syncs, and netcube-operator as its own assigns LoadBalancer IPs: the
// roles grant what each needs. The agent's token may not write a
// Service's status nor the operator's Lease, and the operator's may
// renew no other Lease of the namespace.
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
		case *coordinationv1.Lease:
			_, err = c.CoordinationV1().Leases(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	path := saKubeconfig(t, "netcube-agent")
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
	// ... and LoadBalancer IPs, netcube-operator's: it takes its Lease,
	// reads the pools, writes a Service's status and its cleanup
	// finalizer, and an Event on a pool that overlaps.
	installPoolCRD(t)
	op := startOperator(t, saKubeconfig(t, "netcube-operator"))
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
	// The agent, serving the address the operator gave (it lies in a
	// pool), may not write a Service's status itself, nor the Lease.
	assigned, err := c.CoreV1().Services("default").Get(ctx, "rbac-lb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// (The agent started before the pools' CRD was installed: it looks
	// for it every 10 s.)
	testenv.WaitFor(t, 15*time.Second, "the assigned LoadBalancer IP served", func() bool {
		_, ok := programmed(t, a.pins)[model.Frontend{Addr: netip.MustParseAddr(assigned.Status.LoadBalancer.Ingress[0].IP), Port: 80, Proto: model.TCP}]
		return ok
	})
	agentClient := clientFor(t, path)
	clusterNetworkPolicyAccess(t, agentClient)
	patch := []byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"198.51.100.1"}]}}}`)
	if _, err := agentClient.CoreV1().Services("default").Patch(ctx, "rbac-lb", types.MergePatchType, patch, metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
		t.Errorf("the agent's token patched a Service's status (or failed otherwise): %v", err)
	}
	if _, err := agentClient.CoreV1().Services("default").Patch(ctx, "rbac-lb", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the agent's token patched a Service (or failed otherwise): %v", err)
	}
	lease, err := agentClient.CoordinationV1().Leases("kube-system").Get(ctx, "netcube-lb-ipam", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the agent's token read the operator's Lease (or failed otherwise): %v %v", lease, err)
	}
	// The operator renews its own Lease alone.
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "rbac-other-lease", Namespace: "kube-system"}}
	if _, err := c.CoordinationV1().Leases("kube-system").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CoordinationV1().Leases("kube-system").Delete(ctx, "rbac-other-lease", metav1.DeleteOptions{})
	})
	opClient := clientFor(t, op.kubeconfig)
	if _, err := opClient.CoordinationV1().Leases("kube-system").Get(ctx, "netcube-lb-ipam", metav1.GetOptions{}); err != nil {
		t.Errorf("the operator's token may not read its own Lease: %v", err)
	}
	if _, err := opClient.CoordinationV1().Leases("kube-system").Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the operator's token updated another Lease (or failed otherwise): %v", err)
	}
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
	for _, l := range []string{a.log, h.log, op.log} {
		log, _ := os.ReadFile(l)
		if bytes.Contains(log, []byte("forbidden")) {
			t.Errorf("agent was denied something:\n%s", log)
		}
	}
}

// TestDaemonSetIsLockedDown: the agent's container is not privileged,
// cannot gain privileges, runs under the runtime's default seccomp
// profile, has a read-only root filesystem, and keeps only the
// capabilities it needs (BPF, NET_ADMIN, NET_RAW, SYS_ADMIN); its metrics and
// health listen on the node's address, not every address; its token may
// list and watch what it reads, get only the kinds it writes Events on
// (for their UID), create Events, apply NodePods and get Nodes (their
// UID, the NodePods' owner), and nothing else: no Service or status
// patch, no Lease. netcube-operator's container keeps no capability and
// runs as no root; its token may do what LoadBalancer IPs need and renew
// the one Lease named in its Role. (The real-node tests run the agent
// so.)
func TestDaemonSetIsLockedDown(t *testing.T) {
	var ds *appsv1.DaemonSet
	var op *appsv1.Deployment
	var cm *corev1.ConfigMap
	roles := map[string]*rbacv1.ClusterRole{}
	var nsRoles []*rbacv1.Role
	var nsBindings []*rbacv1.RoleBinding
	for _, obj := range decode(t, render(t)) {
		switch o := obj.(type) {
		case *appsv1.DaemonSet:
			ds = o
		case *appsv1.Deployment:
			op = o
		case *corev1.ConfigMap:
			cm = o
		case *rbacv1.ClusterRole:
			roles[o.Name] = o
		case *rbacv1.Role:
			nsRoles = append(nsRoles, o)
		case *rbacv1.RoleBinding:
			nsBindings = append(nsBindings, o)
		}
	}
	role := roles["netcube-agent"]
	if ds == nil || role == nil || op == nil || roles["netcube-operator"] == nil || cm == nil {
		t.Fatal("the chart renders no DaemonSet, Deployment, ConfigMap or no ClusterRole of the agent or of the operator")
	}
	if sc := ds.Spec.Template.Spec.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("the agent's pod runs without the runtime's default seccomp profile: %+v", sc)
	}
	for _, c := range append(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers...) {
		lockedDown(t, c, []corev1.Capability{"BPF", "NET_ADMIN", "NET_RAW", "SYS_ADMIN"})
		if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil && c.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container %s: seccomp %s", c.Name, c.SecurityContext.SeccompProfile.Type)
		}
	}
	cfg := agentcfg.Defaults()
	if err := yamlToConfig(cm.Data["config.yaml"], &cfg); err != nil {
		t.Fatal(err)
	}
	for flag, addr := range map[string]string{"metricsBindAddress": cfg.MetricsBindAddress, "healthzBindAddress": cfg.HealthzBindAddress} {
		if !strings.HasPrefix(addr, agentcfg.NodeAddressHost+":") {
			t.Errorf("config %s %q: not the node's address", flag, addr)
		}
	}
	nodeIP := false
	for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
		nodeIP = nodeIP || e.Name == agentcfg.NodeIPEnv && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
	}
	if !nodeIP {
		t.Errorf("the agent is not given $%s from status.hostIP", agentcfg.NodeIPEnv)
	}
	opPod := op.Spec.Template.Spec
	if sc := opPod.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("the operator's pod runs as root or without the default seccomp profile: %+v", sc)
	}
	if opPod.ServiceAccountName != "netcube-operator" {
		t.Errorf("the operator runs as ServiceAccount %q, want its own", opPod.ServiceAccountName)
	}
	for _, c := range opPod.Containers {
		lockedDown(t, c, nil)
	}

	reads := map[string]bool{"services": true, "nodes": true, "pods": true, "namespaces": true, "endpointslices": true, "networkpolicies": true,
		"networkslices": true, "networkloadbalancerpools": true, "nodepods": true, "networkbgppeerings": true, "clusternetworkpolicies": true}
	eventTargets := map[string]bool{"services": true, "endpointslices": true, "pods": true, "networkpolicies": true, "networkslices": true,
		"nodepods": true, "networkbgppeerings": true, "clusternetworkpolicies": true}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			for _, verb := range r.Verbs {
				ok := (verb == "list" || verb == "watch") && reads[res] ||
					verb == "get" && eventTargets[res] ||
					verb == "create" && res == "events" ||
					// --pod-source=nodepods: its node's NodePods, applied,
					// owned by the Node (its UID); admission holds it to
					// its own node's (TestNodePodsOnlyForTheWritersNode).
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
	for _, r := range roles["netcube-operator"].Rules {
		for _, res := range r.Resources {
			for _, verb := range r.Verbs {
				ok := (verb == "list" || verb == "watch") && (res == "services" || res == "networkloadbalancerpools") ||
					verb == "get" && (res == "services" || res == "networkloadbalancerpools") ||
					verb == "create" && res == "events" ||
					// The addresses, and the cleanup finalizer.
					verb == "patch" && (res == "services/status" || res == "services")
				if !ok {
					t.Errorf("the operator's ClusterRole grants %s on %s", verb, res)
				}
			}
		}
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("unexpected rule %+v", r)
		}
	}
	// Namespaced roles: the operator's Lease, by name, alone; none for
	// the agent.
	for _, b := range nsBindings {
		for _, s := range b.Subjects {
			if s.Name == "netcube-agent" {
				t.Errorf("RoleBinding %s grants the agent %s", b.Name, b.RoleRef.Name)
			}
		}
	}
	for _, r := range nsRoles {
		for _, rule := range r.Rules {
			if !slices.Equal(rule.Resources, []string{"leases"}) || !slices.Equal(rule.ResourceNames, []string{"netcube-lb-ipam"}) {
				t.Errorf("Role %s: rule %+v is not the operator's Lease by name", r.Name, rule)
			}
			for _, v := range rule.Verbs {
				if v != "get" && v != "update" {
					t.Errorf("Role %s grants %s on its Lease", r.Name, v)
				}
			}
		}
	}
}

// lockedDown checks a container is not privileged, cannot gain
// privileges, has a read-only root filesystem, drops every capability
// and adds only caps.
func lockedDown(t *testing.T, c corev1.Container, caps []corev1.Capability) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("container %s: no securityContext", c.Name)
		return
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
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container %s: does not drop every capability: %+v", c.Name, sc.Capabilities)
	} else if got := slices.Sorted(slices.Values(sc.Capabilities.Add)); !slices.Equal(got, caps) {
		t.Errorf("container %s: adds %v, want only %v", c.Name, got, caps)
	}
}
