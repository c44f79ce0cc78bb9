package policy_test

import (
	"fmt"
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// BenchmarkPolicyUpdate times one change, compiled (Compiler.Update: what
// the agent does per change before its map writes), in the benchmark's
// cluster of 10 namespaces of 20 pods with 10 to 10,000 policies: a pod
// relabelled (it leaves the policies selecting its old labels and joins
// those selecting the new) and a policy's rule rewritten. Two spreads:
// "same", the changed pod's namespace holds a tenth of the policies (the
// pod's policies, and so the entries the change rewrites, grow with
// them: the cost per entry should not); "other", it holds at most 10 and
// the rest are in the other namespaces (the change's own work is the
// same: its cost should not grow).
// `go test -run XXX -bench PolicyUpdate ./pkg/cubes/policy`.
func BenchmarkPolicyUpdate(b *testing.B) {
	for _, c := range updateBenchSizes {
		benchmarkPolicyUpdate(b, c.spread, c.perNS, func(c *policy.Compiler) int { return c.Changes().Len() })
	}
}

// BenchmarkPolicySync times the same changes compiled and written into
// the kernel's maps (SyncChanges): the agent's whole work per change, as
// netcube_policy_sync_seconds times it. Needs root.
// `go test -run XXX -bench PolicySync ./pkg/cubes/policy`.
func BenchmarkPolicySync(b *testing.B) {
	testenv.RequireRoot(b)
	for _, c := range updateBenchSizes {
		dp, err := datapath.Load(datapath.Config{})
		if err != nil {
			b.Fatal(err)
		}
		benchmarkPolicyUpdate(b, c.spread, c.perNS, func(c *policy.Compiler) int {
			ch := c.Changes()
			if err := policy.SyncChanges(dp.Maps(), c.Tables(), ch); err != nil {
				b.Fatal(err)
			}
			return ch.Len()
		})
		dp.Close()
	}
}

var updateBenchSizes = []struct {
	spread string
	perNS  int
}{{"same", 1}, {"same", 10}, {"same", 100}, {"same", 1000}, {"other", 100}, {"other", 1000}}

// benchmarkPolicyUpdate times each change compiled, then handed to sync,
// which returns how many keys it took.
func benchmarkPolicyUpdate(b *testing.B, spread string, perNS int, sync func(*policy.Compiler) int) {
	{
		cl := policy.ScaleCluster(10, 20, perNS, []string{"node1", "node2"})
		if spread == "other" {
			for k := 10; k < perNS; k++ {
				cl.SetPolicy(model.PolicyID{Namespace: "ns1", Name: fmt.Sprintf("pol%d", k)}, nil)
			}
		}
		c := policy.NewCompiler()
		c.Compile(cl, func(p *model.Pod) bool { return p.Node == "node1" }, []netip.Addr{netip.MustParseAddr("172.30.0.11")})
		sync(c)
		name := fmt.Sprintf("policies=%d/spread=%s", len(cl.Policies), spread)
		b.Run(name+"/change=label", func(b *testing.B) {
			id := model.PodID{Namespace: "ns1", Name: "p2"} // on node1
			keys := 0
			for i := 0; b.Loop(); i++ {
				p := *cl.Pods[id]
				p.Labels = map[string]string{"app": fmt.Sprintf("a%d", i%5), "tier": "t0"}
				cl.SetPod(id, &p)
				c.Update([]model.PodID{id}, nil, nil)
				keys += sync(c)
			}
			b.ReportMetric(float64(keys)/float64(b.N), "keys/op")
		})
		// A pod of the other node given a label no other pod has, and then
		// back: a class made and emptied each time (the policies whose
		// peers match it gain and lose its entries).
		b.Run(name+"/change=class", func(b *testing.B) {
			id := model.PodID{Namespace: "ns1", Name: "p1"} // on node2
			keys := 0
			for i := 0; b.Loop(); i++ {
				p := *cl.Pods[id]
				p.Labels = map[string]string{"app": "a1", "tier": "t1"}
				if i%2 == 0 {
					p.Labels["role"] = "prober"
				}
				cl.SetPod(id, &p)
				c.Update([]model.PodID{id}, nil, nil)
				keys += sync(c)
			}
			b.ReportMetric(float64(keys)/float64(b.N), "keys/op")
		})
		b.Run(name+"/change=policy", func(b *testing.B) {
			id := model.PolicyID{Namespace: "ns1", Name: "pol0"}
			keys := 0
			for i := 0; b.Loop(); i++ {
				pol := *cl.Policies[id]
				from, _ := labels.Parse(fmt.Sprintf("app=a%d", i%5))
				pol.Ingress = []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: from}},
					Ports: []model.PolicyPort{{Proto: model.TCP, Port: uint16(20000 + i%1000)}}}}
				cl.SetPolicy(id, &pol)
				c.Update(nil, nil, []model.PolicyID{id})
				keys += sync(c)
			}
			b.ReportMetric(float64(keys)/float64(b.N), "keys/op")
		})
	}
}
