package policy_test

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestPolicyChangeLatency prints how long a change takes from the event to
// the datapath (compile what changed and write it into the kernel's maps)
// at the benchmark's scale, and the maps' size per policy. A figure, not a
// timed assertion: `go test ./pkg/cubes/policy -run PolicyChangeLatency -v`.
func TestPolicyChangeLatency(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	cl := policy.ScaleCluster(10, 20, 100, []string{"node1", "node2"})
	c := policy.NewCompiler()
	local := func(p *model.Pod) bool { return p.Node == "node1" }
	host := []netip.Addr{netip.MustParseAddr("172.30.0.11")}
	start := time.Now()
	have := c.Compile(cl, local, host)
	compiled := time.Since(start)
	if err := policy.SyncChanges(dp.Maps(), have, c.Changes()); err != nil {
		t.Fatal(err)
	}
	t.Logf("initial: %d identities, %d endpoints, %d entries; compile %v, total %v",
		len(have.Peers), len(have.Endpoints), len(have.Entries), compiled, time.Since(start))
	var lat, comp []time.Duration
	for i := 0; i < 100; i++ {
		// One pod's label changes (the change that touches most).
		p := *cl.Pods[model.PodID{Namespace: "ns1", Name: "p3"}]
		p.Labels = map[string]string{"app": fmt.Sprintf("a%d", i%5), "tier": "t1"}
		cl.SetPod(p.ID, &p)
		start := time.Now()
		c.Update([]model.PodID{p.ID}, nil, nil)
		comp = append(comp, time.Since(start))
		if err := policy.SyncChanges(dp.Maps(), c.Tables(), c.Changes()); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	slices.Sort(comp)
	t.Logf("label change -> datapath: p50 %v, p99 %v (target < 10 ms); of which compiling p50 %v, p99 %v",
		lat[len(lat)/2], lat[len(lat)*99/100], comp[len(comp)/2], comp[len(comp)*99/100])
	// pol_rules' (or pol_entries') key and value, and a node's overhead
	// (about 40 bytes: a hash element's, or the kernel's LPM trie's), per
	// policy.
	t.Logf("policy entries per policy: %.1f (about %d bytes each in the kernel)", float64(len(have.Entries))/1000, 20+1+40)
}
