package policy_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// BenchmarkPolicyUpdate times one change, compiled (Compiler.Update: what
// the agent does per change before its map writes), in the benchmark's
// cluster of 10 namespaces of 20 pods with 10 to 10,000 policies, for
// each of policy.ScaleChanges and both spreads (policy.ScaleSpread).
// `go test -run XXX -bench PolicyUpdate ./pkg/cubes/policy`.
// `netcube-lab bench policy-latency` reports the same changes' compile
// and write times (its "the agent's work alone" table).
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
		dp, err := loadTrusting(datapath.Config{})
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
	spread policy.ScaleSpread
	perNS  int
}{{policy.SpreadSame, 1}, {policy.SpreadSame, 10}, {policy.SpreadSame, 100}, {policy.SpreadSame, 1000},
	{policy.SpreadOther, 100}, {policy.SpreadOther, 1000}}

// benchmarkPolicyUpdate times each change compiled, then handed to sync,
// which returns how many keys it took.
func benchmarkPolicyUpdate(b *testing.B, spread policy.ScaleSpread, perNS int, sync func(*policy.Compiler) int) {
	cl := policy.ScaleClusterSpread(10, 20, perNS, []string{"node1", "node2"}, spread)
	c := policy.NewCompiler()
	c.Compile(cl, func(p *model.Pod) bool { return p.Node == "node1" }, []netip.Addr{netip.MustParseAddr("172.30.0.11")})
	sync(c)
	name := fmt.Sprintf("policies=%d/spread=%s", len(cl.Policies), spread)
	for _, change := range policy.ScaleChanges() {
		b.Run(name+"/change="+change.Name, func(b *testing.B) {
			keys := 0
			var compile, write time.Duration
			for i := 0; b.Loop(); i++ {
				pods, nss, pols := change.Make(cl, i)
				t0 := time.Now()
				c.Update(pods, nss, pols)
				t1 := time.Now()
				keys += sync(c)
				compile, write = compile+t1.Sub(t0), write+time.Since(t1)
			}
			b.ReportMetric(float64(keys)/float64(b.N), "keys/op")
			// The two parts apart: in BenchmarkPolicySync the compile
			// runs right after the kernel's map writes, and has taken
			// from as long to four times as long as back to back in
			// BenchmarkPolicyUpdate here; the agent's compile, between
			// changes far apart, runs cold too.
			b.ReportMetric(float64(compile.Nanoseconds())/float64(b.N), "compile-ns/op")
			b.ReportMetric(float64(write.Nanoseconds())/float64(b.N), "sync-ns/op")
		})
	}
}
