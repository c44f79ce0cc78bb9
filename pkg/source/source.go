// Package source defines how desired state reaches the agent: a Source
// delivers Service and EndpointSlice changes, one object at a time, to a
// Handler. Implementations: yamldir (a directory of Kubernetes YAML, for the
// standalone sandbox) and, next to it, the Kubernetes API.
package source

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Handler receives changes. A nil object means the object was deleted.
// Implementations must be safe for concurrent calls (informers for
// different kinds deliver from different goroutines).
type Handler interface {
	OnService(key types.NamespacedName, svc *corev1.Service)
	OnEndpointSlice(key types.NamespacedName, slice *discoveryv1.EndpointSlice)
	// OnNode delivers this node's Node object (its addresses, for the
	// node-facing Service types).
	OnNode(name string, node *corev1.Node)
	// OnSynced is called once, after the initial state has been delivered:
	// only then may the agent remove what the state no longer contains.
	OnSynced()
}

// Source delivers state to a Handler until ctx is done.
type Source interface {
	Run(ctx context.Context, h Handler) error
}
