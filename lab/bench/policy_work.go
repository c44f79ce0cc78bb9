package bench

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// PolicyWorkPoint is the agent's work for one kind of change alone, in
// the benchmark's process: the compilation (Compiler.Update) and the map
// writes (SyncChanges into the kernel's maps, not pinned, not read by any
// program), each change timed apart, with nothing else of the agent's
// (its event handling, the API server) sharing its time. The live
// agent's figure (PolicyLatencyPoint.SyncP99) is this plus the waits for
// the CPU the API server, etcd and the probe share.
type PolicyWorkPoint struct {
	Policies   int     `json:"policies"`
	Spread     string  `json:"spread"`
	Change     string  `json:"change"`
	Keys       float64 `json:"keys_per_change"`
	CompileP50 float64 `json:"compile_p50_ms"`
	CompileP99 float64 `json:"compile_p99_ms"`
	WriteP50   float64 `json:"writes_p50_ms"`
	WriteP99   float64 `json:"writes_p99_ms"`
	TotalP50   float64 `json:"total_p50_ms"`
	TotalP99   float64 `json:"total_p99_ms"`
}

// measurePolicyWork times changes of each of policy.ScaleChanges in a
// policy.ScaleCluster of the given size and spread, whose first node is
// this one.
func measurePolicyWork(namespaces, podsPerNS, perNS int, spread policy.ScaleSpread, changes int) ([]PolicyWorkPoint, error) {
	dp, err := datapath.Load(datapath.Config{})
	if err != nil {
		return nil, err
	}
	defer dp.Close()
	cl := policy.ScaleClusterSpread(namespaces, podsPerNS, perNS, []string{"node1", "node2"}, spread)
	c := policy.NewCompiler()
	t := c.Compile(cl, func(p *model.Pod) bool { return p.Node == "node1" }, []netip.Addr{netip.MustParseAddr("172.30.0.11")})
	if err := policy.SyncChanges(dp.Maps(), t, c.Changes()); err != nil {
		return nil, err
	}
	var out []PolicyWorkPoint
	for _, change := range policy.ScaleChanges() {
		pt := PolicyWorkPoint{Policies: len(cl.Policies), Spread: string(spread), Change: change.Name}
		var compile, write, total []float64
		keys := 0
		for i := range changes {
			pods, nss, pols := change.Make(cl, i)
			t0 := time.Now()
			c.Update(pods, nss, pols)
			t1 := time.Now()
			ch := c.Changes()
			if err := policy.SyncChanges(dp.Maps(), c.Tables(), ch); err != nil {
				return nil, fmt.Errorf("%s change %d: %w", change.Name, i, err)
			}
			t2 := time.Now()
			keys += ch.Len()
			compile, write, total = append(compile, ms(t1.Sub(t0))), append(write, ms(t2.Sub(t1))), append(total, ms(t2.Sub(t0)))
		}
		for _, s := range [][]float64{compile, write, total} {
			slices.Sort(s)
		}
		pt.Keys = float64(keys) / float64(changes)
		pt.CompileP50, pt.CompileP99 = quantile(compile, 0.5), quantile(compile, 0.99)
		pt.WriteP50, pt.WriteP99 = quantile(write, 0.5), quantile(write, 0.99)
		pt.TotalP50, pt.TotalP99 = quantile(total, 0.5), quantile(total, 0.99)
		out = append(out, pt)
	}
	return out, nil
}

// workMarkdown renders the agent's work alone.
func workMarkdown(b *strings.Builder, points []PolicyWorkPoint, changes int) {
	b.WriteString("## The agent's work alone\n\n")
	fmt.Fprintf(b, "The same compiler and map writes in the benchmark's own process, %d changes of each kind timed one by one "+
		"(exact percentiles, not the histogram's buckets), with nothing else running in the process and no API server "+
		"traffic at the time: what a change costs the agent when it has a CPU to itself. The cluster is `policy.ScaleCluster` "+
		"(10 namespaces of 20 pods, half on this node; the peers as above, one policy in three on a named port); "+
		"the changes are `policy.ScaleChanges`: **label**, a pod of this node relabelled (it leaves the policies selecting "+
		"its old labels and joins those selecting the new); **class**, a pod of the other node given a label no pod has, and "+
		"back (a new identity, whose entries every rule whose peers match it gains, then loses); **policy**, a rule rewritten. "+
		"Spread *same*: the changed namespace holds a tenth of the policies, so a change's keys grow with them; *other*: it "+
		"holds 10 and the other namespaces the rest, so the change's own work is the same at every size and its cost should be too.\n\n", changes)
	b.WriteString("| NetworkPolicies | spread | change | keys per change | compile p50 / p99 ms | map writes p50 / p99 ms | total p50 / p99 ms | target: p99 < 5 ms |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---|\n")
	for _, p := range points {
		fmt.Fprintf(b, "| %d | %s | %s | %.0f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %s |\n", p.Policies, p.Spread, p.Change,
			p.Keys, p.CompileP50, p.CompileP99, p.WriteP50, p.WriteP99, p.TotalP50, p.TotalP99, met(p.TotalP99 < 5))
	}
	b.WriteString("\n")
}
