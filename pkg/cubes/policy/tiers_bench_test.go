package policy_test

import (
	"fmt"
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/model"
)

// BenchmarkTierUpdate times one ClusterNetworkPolicy edit compiled
// (TakeClusterPolicies and Compiler.Update, the agent's work per change
// before its map writes)
// with 10 to 1,000 ClusterNetworkPolicies over the scale cluster (10
// namespaces of 20 pods, one NetworkPolicy each), shaped as `netcube-lab
// bench policy-latency --cluster-policies` makes them: half Admin, half
// Baseline, each selecting one app of a team's namespaces and naming
// another app, on one port. `go test -run XXX -bench TierUpdate
// -cpuprofile cpu.out ./pkg/cubes/policy` shows where a change's time
// goes (docs/benchmarks/cluster-policy-profile.md).
func BenchmarkTierUpdate(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("cluster-policies=%d", n), func(b *testing.B) {
			cl := policy.ScaleCluster(10, 20, 1, []string{"node1", "node2"})
			for k := range n {
				cl.SetClusterPolicy(benchCNPName(k), benchClusterPolicy(k, 2000+(k*7)%17000, model.Deny))
			}
			local, host := func(p *model.Pod) bool { return p.Node == "node1" }, []netip.Addr{netip.MustParseAddr("172.30.0.11")}
			c := policy.NewCompiler()
			c.Compile(cl, local, host)
			// A ClusterNetworkPolicy edited, as the reconciler takes it:
			// no network changes, so Update compiles the tier sets its
			// subject selects.
			b.Run("change=cluster-policy-edit", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					edit := benchClusterPolicy(0, 30000+i%1000, []model.RuleAction{model.Accept, model.Deny}[i%2])
					cl.SetClusterPolicy(edit.Name, edit)
					if c.TakeClusterPolicies([]string{edit.Name}) {
						b.Fatal("an edit of ports and action changed a network: want no Compile")
					}
					c.Update(nil, nil, nil)
				}
			})
			// The scale benchmark's own changes (a pod relabelled, added,
			// a NetworkPolicy edited): Compiler.Update, which computes
			// again the tier functions whose inputs changed.
			for _, change := range policy.ScaleChanges() {
				b.Run("change="+change.Name, func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						pods, nss, pols := change.Make(cl, i)
						c.Update(pods, nss, pols)
					}
				})
			}
		})
	}
}

func benchCNPName(k int) string { return fmt.Sprintf("cnp%04d", k) }

func benchClusterPolicy(k, port int, action model.RuleAction) *model.ClusterPolicy {
	tier, prio := model.AdminTier, int32(100+k/2)
	if k%2 == 1 {
		tier, prio = model.BaselineTier, int32(k/2)
	}
	sel := func(key string, v int, mod int) labels.Selector {
		return labels.SelectorFromSet(labels.Set{key: fmt.Sprintf("%s%d", map[string]string{"team": "t", "app": "a"}[key], v%mod)})
	}
	peer := func(i int) []model.PolicyPeer {
		return []model.PolicyPeer{{Namespaces: sel("team", i, 3), Pods: sel("app", i+1, 5)}}
	}
	ports := []model.PolicyPort{{Proto: model.TCP, Port: uint16(port)}}
	return &model.ClusterPolicy{Name: benchCNPName(k), Tier: tier, Priority: prio, Namespaces: sel("team", k, 3), Pods: sel("app", k, 5),
		Ingress: []model.ClusterRule{{Action: action, Peers: peer(k), Ports: ports}},
		Egress:  []model.ClusterRule{{Action: action, Peers: peer(k + 1), Ports: ports}}}
}
