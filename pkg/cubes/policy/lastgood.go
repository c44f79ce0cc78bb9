package policy

import (
	"fmt"
	"log/slog"
	"maps"
	"strings"

	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// A ClusterNetworkPolicy that cannot be read whole is never applied in
// part over a version that could: the cube keeps enforcing that last good
// version whole, says so (an InvalidField Event on the policy, `netcube
// status`), and applies the next update read whole. Without a good
// version to keep, the policy is enforced as read, failing closed (a
// field that cannot be read accepts nothing, or denies everything), or,
// when its tier, priority or subject cannot be read, as the version
// before it if any: nothing else. The last good version lives in memory:
// an agent started on a broken policy enforces it failing closed.

// takeClusterPolicy decides what of p (nil: deleted) name's policy
// enforces, and returns the message to report on it ("": none) and
// whether the policies to compile changed. Called under r.mu.
func (r *Reconciler) takeClusterPolicy(name string, p *model.ClusterPolicy) (msg string, changed bool) {
	cur := r.cluster.ClusterPolicies[name]
	var why string
	if p != nil && p.Invalid != nil {
		why = strings.ReplaceAll(p.Invalid.Error(), "\n", "; ")
	}
	switch {
	case p == nil || p.Invalid == nil:
		delete(r.notApplied, name)
		r.cluster.SetClusterPolicy(name, p)
		return "", true
	case cur != nil && cur.Invalid == nil:
		msg = fmt.Sprintf("update (resourceVersion %s) not applied (%s), enforcing the last good version (resourceVersion %s)",
			p.ResourceVersion, why, cur.ResourceVersion)
	case p.Unenforceable && cur != nil:
		msg = fmt.Sprintf("update (resourceVersion %s) not applied (%s), enforcing the version before (resourceVersion %s), itself not read whole: failing closed",
			p.ResourceVersion, why, cur.ResourceVersion)
	case p.Unenforceable:
		msg = fmt.Sprintf("not applied (%s): no version of it was read whole", why)
	default:
		msg = fmt.Sprintf("not read whole (%s): no good version to keep, enforced as read, failing closed", why)
		r.cluster.SetClusterPolicy(name, p)
		changed = true
	}
	r.notApplied[name] = msg
	return msg, changed
}

// reportClusterPolicy reports msg on name's policy ("": clears it).
func (r *Reconciler) reportClusterPolicy(name, msg string) {
	if r.report == nil {
		if msg != "" {
			slog.Warn("ClusterNetworkPolicy not applied as written", "policy", name, "problem", msg)
		}
		return
	}
	r.report.Set(clusterPolicyObject(name), report.InvalidField, msg)
}

// PoliciesNotApplied are the ClusterNetworkPolicies whose last update is
// not enforced as written, and what is enforced instead, by object
// ("ClusterNetworkPolicy name"), for `netcube status`.
func (r *Reconciler) PoliciesNotApplied() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.notApplied))
	for name, msg := range maps.All(r.notApplied) {
		out[clusterPolicyObject(name).String()] = msg
	}
	return out
}
