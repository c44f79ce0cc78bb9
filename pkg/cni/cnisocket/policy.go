package cnisocket

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/netcube/netcube/pkg/cni"
	"github.com/netcube/netcube/pkg/model"
)

// PodPolicy is the agent's NetworkPolicy as the socket asks it, so that
// no pod runs before its policy is in the maps (pkg/cubes/policy's
// Reconciler).
type PodPolicy interface {
	// PolicySynced is closed once the first whole policy sync is written.
	PolicySynced() <-chan struct{}
	// AdmitPod writes the policy of pod id, wired in sandbox with addrs,
	// and returns once it is in the maps (or why it is not).
	AdmitPod(ctx context.Context, id model.PodID, sandbox string, addrs []netip.Addr) error
	// ForgetPod forgets the addresses of the pod wired in sandbox.
	ForgetPod(sandbox string)
}

// ErrPolicyNotSynced is why the socket refuses ADD (and STATUS says not
// ready) after the agent starts: until its first whole policy sync is
// written, a pod's rules, and its peers' identities, may be missing (a
// node's reboot would start every pod open).
var ErrPolicyNotSynced = errors.New("agent has not finished its first policy sync")

// WithPolicy is h with ADD answered only once p has written the pod's
// policy: refused before p's first sync, for a pod the plugin cannot
// name, and when p cannot write it (the plugin then undoes the pod, and
// the runtime tries again). DEL and CHECK are served as ever.
func WithPolicy(h AgentHandler, p PodPolicy) AgentHandler { return gated{h, p} }

type gated struct {
	AgentHandler
	policy PodPolicy
}

func (g gated) Ready() error {
	select {
	case <-g.policy.PolicySynced():
	default:
		return ErrPolicyNotSynced
	}
	return g.AgentHandler.Ready()
}

func (g gated) PodAdded(p cni.Pod) error {
	if p.Namespace == "" || p.Name == "" {
		return fmt.Errorf("ADD of container %s names no pod (CNI_ARGS K8S_POD_NAMESPACE and K8S_POD_NAME): "+
			"this node enforces NetworkPolicy and cannot write the policy of a pod it cannot name", p.ContainerID)
	}
	if err := g.Ready(); err != nil {
		return err
	}
	if err := g.AgentHandler.PodAdded(p); err != nil {
		return err
	}
	return g.policy.AdmitPod(context.Background(), model.PodID{Namespace: p.Namespace, Name: p.Name}, p.ContainerID, p.Addrs)
}

func (g gated) PodDeleted(p cni.Pod) error {
	g.policy.ForgetPod(p.ContainerID)
	return g.AgentHandler.PodDeleted(p)
}
