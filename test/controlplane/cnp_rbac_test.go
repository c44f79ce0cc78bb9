package controlplane

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// cnpCRD is the upstream ClusterNetworkPolicy CRD the chart installs
// (deploy's TestClusterNetworkPolicyCRDIsUpstreams holds it to the
// upstream file).
const cnpCRD = chart + "/crds/policy.networking.k8s.io_clusternetworkpolicies.yaml"

var clusterNetworkPolicies = schema.GroupVersionResource{Group: "policy.networking.k8s.io", Version: "v1beta1", Resource: "clusternetworkpolicies"}

// clusterNetworkPolicyAccess: with the chart's CRD served, the agent's
// token (agent, of the chart's ServiceAccount) may read
// ClusterNetworkPolicies as its informers do (list, watch), get one (its
// UID, for an Event on it) and create Events, and may not write one nor
// its status. Asked of the API server's authorizer (a
// SelfSubjectAccessReview with the agent's token), so it holds whether or
// not the agent watches them yet. The CRD stays, as the pools' does: the
// agents run with or without it.
func clusterNetworkPolicyAccess(t *testing.T, agent kubernetes.Interface) {
	t.Helper()
	installCRD(t, cnpCRD, clusterNetworkPolicies)
	for _, c := range []struct {
		group, resource, sub, verb string
		allowed                    bool
	}{
		{"policy.networking.k8s.io", "clusternetworkpolicies", "", "list", true},
		{"policy.networking.k8s.io", "clusternetworkpolicies", "", "watch", true},
		{"policy.networking.k8s.io", "clusternetworkpolicies", "", "get", true},
		{"", "events", "", "create", true},
		{"policy.networking.k8s.io", "clusternetworkpolicies", "", "create", false},
		{"policy.networking.k8s.io", "clusternetworkpolicies", "", "update", false},
		{"policy.networking.k8s.io", "clusternetworkpolicies", "status", "patch", false},
	} {
		r, err := agent.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: c.group, Resource: c.resource, Subresource: c.sub, Verb: c.verb}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview %s %s: %v", c.verb, c.resource, err)
		}
		if r.Status.Allowed != c.allowed {
			t.Errorf("the agent's token: %s %s/%s allowed=%v, want %v (%s)", c.verb, c.resource, c.sub, r.Status.Allowed, c.allowed, r.Status.Reason)
		}
	}
}
