package kube

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source"
)

// ClusterNetworkPolicies is the resource of SIG Network's
// ClusterNetworkPolicy CRD (sigs.k8s.io/network-policy-api, in the chart).
var ClusterNetworkPolicies = cnpv1.SchemeGroupVersion.WithResource("clusternetworkpolicies")

// clusterPolicyStream delivers the ClusterNetworkPolicies. The CRD is
// optional: while it is not installed there are none, and the stream
// looks again now and then (no error each time).
func (s *Source) clusterPolicyStream(c *client, h source.ClusterPolicyHandler) *stream[*model.ClusterPolicy] {
	return &stream[*model.ClusterPolicy]{
		streamOptions: s.streamOptions(),
		name:          "clusternetworkpolicies",
		optional:      true,
		api:           dynamicResource{c.dynamic.Resource(schema.GroupVersionResource(ClusterNetworkPolicies))},
		// What cannot be read is the policy cube's to report: it alone
		// knows whether a last good version is kept.
		convert: func(o runtime.Object) *model.ClusterPolicy {
			u := o.(*unstructured.Unstructured)
			var api cnpv1.ClusterNetworkPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &api); err != nil {
				return k8s.UnreadClusterPolicy(u.GetName(), u.GetResourceVersion(), fmt.Errorf("not a ClusterNetworkPolicy: %w", err))
			}
			return k8s.ReadClusterPolicy(&api)
		},
		deliver: func(k types.NamespacedName, p *model.ClusterPolicy) { h.OnClusterPolicy(k.Name, p) },
		known: func() []types.NamespacedName {
			var out []types.NamespacedName
			for _, n := range slices.Sorted(slices.Values(h.ClusterPolicyKeys())) {
				out = append(out, types.NamespacedName{Name: n})
			}
			return out
		},
	}
}
