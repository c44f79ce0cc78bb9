// Package source defines how desired state reaches the agent: a Source
// delivers Service and EndpointSlice changes, one object at a time, to a
// Handler. Implementations: yamldir (a directory of Kubernetes YAML, for the
// standalone sandbox) and, next to it, the Kubernetes API.
package source

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
)

// Handler receives changes, already converted to netcube's model
// (k8s.ToService, k8s.ToEndpointSlice). A nil object means the object was
// deleted, or is one netcube does not program (a headless Service, an FQDN
// slice). Implementations must be safe for concurrent calls (different
// kinds are delivered from different goroutines).
type Handler interface {
	OnService(key types.NamespacedName, svc *model.Service)
	OnEndpointSlice(key types.NamespacedName, slice *model.EndpointSlice)
	// OnNode delivers this node as its Node object describes it (nil:
	// deleted).
	OnNode(name string, node *model.NodeInfo)
	// OnSynced is called once, after the initial state has been delivered:
	// only then may the agent remove what the state no longer contains.
	OnSynced()
	// ServiceKeys and EndpointSliceKeys list what the handler holds
	// (delivered, not deleted). A source that has to list everything again
	// asks, and delivers as deletions what the new list lacks: the handler
	// is the only store, sources keep no copy.
	ServiceKeys() []types.NamespacedName
	EndpointSliceKeys() []types.NamespacedName
}

// PolicyHandler receives what NetworkPolicy is enforced from: every pod,
// namespace and NetworkPolicy (nil: deleted, or a pod that has
// finished; a pod without an address yet comes with none). A Source delivers them when its Handler implements this too, and
// calls OnPoliciesSynced once all three initial lists are delivered.
type PolicyHandler interface {
	OnPod(key types.NamespacedName, pod *model.Pod)
	OnNamespace(name string, ns *model.Namespace)
	OnPolicy(key types.NamespacedName, p *model.Policy)
	OnPoliciesSynced()
	PodKeys() []types.NamespacedName
	NamespaceKeys() []types.NamespacedName
	PolicyKeys() []types.NamespacedName
}

// ClusterPolicyHandler receives the ClusterNetworkPolicies (nil:
// deleted; the kube source sends one that cannot be read whole with
// Invalid set, for the handler to keep its last good version). A Source delivers them, when
// a PolicyHandler implements this too, before it calls OnPoliciesSynced
// (at once when the API serves none: the CRD is not installed).
type ClusterPolicyHandler interface {
	OnClusterPolicy(name string, p *model.ClusterPolicy)
	ClusterPolicyKeys() []string
}

// SliceHandler receives the NetworkSlices (nil: deleted, or new and
// invalid). A Source delivers them when its Handler implements this too,
// with the pods and namespaces they select from (PolicyHandler).
type SliceHandler interface {
	OnSlice(name string, s *model.Slice)
	// OnSlicesSynced: every NetworkSlice listed has been delivered (or
	// the API serves none: the CRD is not installed).
	OnSlicesSynced()
	SliceKeys() []string
}

// BGPHandler receives the NetworkBGPPeerings (nil: deleted, or
// unusable). A Source delivers them when its Handler implements this too.
type BGPHandler interface {
	OnBGPPeering(name string, p *model.BGPPeering)
	// OnBGPPeeringsSynced: every NetworkBGPPeering listed has been
	// delivered (or the API serves none: the CRD is not installed).
	OnBGPPeeringsSynced()
	BGPPeeringKeys() []string
}

// Source delivers state to a Handler until ctx is done.
type Source interface {
	Run(ctx context.Context, h Handler) error
}
