package controlplane

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/source/kube"
)

// TestNodePodsOnlyForTheWritersNode: with the chart's agent RBAC and its
// ValidatingAdmissionPolicy created for real, an agent holding the token
// the kubelet would give its Pod on node adm-a (bound to that Pod, so
// carrying the node-name claim) applies NodePods adm-a (the positive
// control) but not NodePods adm-b, another node's, which would give that
// node's pod addresses labels of its choosing; a token of the agent's
// ServiceAccount bound to no Pod (no node claim) may write none. Each
// refusal names the object and why.
func TestNodePodsOnlyForTheWritersNode(t *testing.T) {
	installCRD(t, nodePodsCRD, kube.NodePodsResource)
	c, ns := env.Client, "kube-system"
	created := createChartObjects(t, func(o runtime.Object) bool {
		switch o := o.(type) {
		case *corev1.ServiceAccount:
			return o.Name == "netcube-agent"
		case *rbacv1.ClusterRole:
			return o.Name == "netcube-agent"
		case *rbacv1.ClusterRoleBinding:
			return o.Name == "netcube-agent"
		case *admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding:
			return true
		}
		return false
	})
	if !created["ValidatingAdmissionPolicy"] || !created["ValidatingAdmissionPolicyBinding"] {
		t.Error("the chart ships no ValidatingAdmissionPolicy and binding for NodePods")
	}
	for _, n := range []string{"adm-a", "adm-b"} {
		if _, err := c.CoreV1().Nodes().Create(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = dynClient(t).Resource(kube.NodePodsResource).Delete(context.Background(), n, metav1.DeleteOptions{})
		})
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "netcube-agent-adm-a", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "adm-a", ServiceAccountName: "netcube-agent", Containers: []corev1.Container{{Name: "agent", Image: "x"}}}}
	agentPod, err := c.CoreV1().Pods(ns).Create(ctx(t), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, *metav1.NewDeleteOptions(0)) })

	token := func(bound *corev1.Pod) string {
		req := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptr[int64](3600)}}
		if bound != nil {
			req.Spec.BoundObjectRef = &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: bound.Name, UID: bound.UID}
		}
		tok, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx(t), "netcube-agent", req, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Status.Token
	}
	clientWith := func(tok string) dynamic.Interface {
		rc := &rest.Config{Host: env.URL, BearerToken: tok, TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(env.Dir, "ca.crt")}}
		d, err := dynamic.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	apply := func(d dynamic.Interface, node string) error {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "netcube.io/v1alpha1", "kind": "NodePods", "metadata": map[string]any{"name": node},
			"spec": map[string]any{"pods": []any{map[string]any{"namespace": "default", "name": "p", "ips": []any{"10.244.77.7"},
				"labels": map[string]any{"role": "admin"}}}}}}
		_, err := d.Resource(kube.NodePodsResource).Apply(ctx(t), node, u, metav1.ApplyOptions{FieldManager: "netcube-agent", Force: true})
		return err
	}
	onA := clientWith(token(agentPod))
	if err := apply(onA, "adm-a"); err != nil {
		t.Fatalf("the agent of adm-a may not write its own NodePods: %v", err)
	}
	// The policy takes effect a moment after it is created: the refusal
	// is waited for (and, without the policy, never comes).
	var refusal error
	testenv.WaitFor(t, 10*time.Second, "the agent of adm-a refused NodePods adm-b", func() bool {
		refusal = apply(onA, "adm-b")
		return refusal != nil
	})
	if !strings.Contains(refusal.Error(), "NodePods adm-b: netcube-agent of node adm-a may write only NodePods adm-a") {
		t.Errorf("the refusal does not say why: %v", refusal)
	}
	if err := apply(onA, "adm-a"); err != nil {
		t.Errorf("with the policy in force, the agent of adm-a may not write its own NodePods: %v", err)
	}
	err = apply(clientWith(token(nil)), "adm-a")
	if err == nil || !strings.Contains(err.Error(), "no authentication.kubernetes.io/node-name claim") {
		t.Errorf("a token bound to no Pod wrote NodePods adm-a (or was refused for another reason): %v", err)
	}
}

// createChartObjects creates the chart's objects that want selects (with
// the default values), deletes those it created when the test ends, and
// says which kinds are there.
func createChartObjects(t *testing.T, want func(runtime.Object) bool) map[string]bool {
	t.Helper()
	c := env.Client
	kinds := map[string]bool{}
	bg := context.Background()
	for _, obj := range decode(t, render(t)) {
		if !want(obj) {
			continue
		}
		var err error
		var undo func() error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(bg, o, metav1.CreateOptions{})
			undo = func() error {
				return c.CoreV1().ServiceAccounts(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{})
			}
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(bg, o, metav1.CreateOptions{})
			undo = func() error { return c.RbacV1().ClusterRoles().Delete(bg, o.Name, metav1.DeleteOptions{}) }
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(bg, o, metav1.CreateOptions{})
			undo = func() error { return c.RbacV1().ClusterRoleBindings().Delete(bg, o.Name, metav1.DeleteOptions{}) }
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(bg, o, metav1.CreateOptions{})
			undo = func() error { return c.RbacV1().Roles(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{}) }
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(bg, o, metav1.CreateOptions{})
			undo = func() error { return c.RbacV1().RoleBindings(o.Namespace).Delete(bg, o.Name, metav1.DeleteOptions{}) }
		case *admissionv1.ValidatingAdmissionPolicy:
			_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(bg, o, metav1.CreateOptions{})
			undo = func() error {
				return c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(bg, o.Name, metav1.DeleteOptions{})
			}
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(bg, o, metav1.CreateOptions{})
			undo = func() error {
				return c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(bg, o.Name, metav1.DeleteOptions{})
			}
		default:
			t.Fatalf("createChartObjects: %T not handled", obj)
		}
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier test (TestRBACIsEnough keeps its):
			// the same object, and not this test's to delete.
			kinds[obj.GetObjectKind().GroupVersionKind().Kind] = true
			continue
		}
		if err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		t.Cleanup(func() {
			if err := undo(); err != nil {
				t.Errorf("cleanup of %T: %v", obj, err)
			}
		})
		kinds[obj.GetObjectKind().GroupVersionKind().Kind] = true
	}
	return kinds
}
