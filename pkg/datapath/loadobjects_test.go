package datapath_test

import (
	"cmp"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
)

// The programs are split into groups of about equal work, each program in
// exactly one, the largest ones apart.
func TestProgramGroups(t *testing.T) {
	for _, n := range []int{1, 2, 4, 1000} {
		groups, sizes, err := datapath.ProgramGroups(n)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(n, len(sizes)); len(groups) != want {
			t.Fatalf("n=%d: %d groups, want %d", n, len(groups), want)
		}
		seen := map[string]int{}
		work := make([]int, len(groups))
		for i, g := range groups {
			if len(g) == 0 {
				t.Errorf("n=%d: group %d is empty", n, i)
			}
			for _, name := range g {
				seen[name]++
				work[i] += sizes[name]
			}
		}
		if !maps.Equal(seen, func() map[string]int {
			m := map[string]int{}
			for name := range sizes {
				m[name] = 1
			}
			return m
		}()) {
			t.Errorf("n=%d: programs placed %v, want each of %d once", n, seen, len(sizes))
		}
		largest := slices.Max(slices.Collect(maps.Values(sizes)))
		if n > 1 && n < len(sizes) && slices.Max(work)-slices.Min(work) > largest {
			t.Errorf("n=%d: groups' instructions %v differ by more than the largest program (%d)", n, work, largest)
		}
	}
	groups, _, _ := datapath.ProgramGroups(2)
	for _, g := range groups {
		if slices.Contains(g, "from_pod") && slices.Contains(g, "from_net") {
			t.Errorf("from_pod and from_net, the two that take the verifier longest, in one group: %v", groups)
		}
	}
}

// Loaded in parallel, every program uses the same maps as when cilium/ebpf
// loads them one after the other: the named maps the agent writes, and
// one copy of each data section (the constants), not one per group.
func TestParallelLoadSharesMaps(t *testing.T) {
	testenv.RequireRoot(t)
	uses := func(parallel bool) (map[string][]string, int) {
		o, err := datapath.LoadObject(parallel)
		if err != nil {
			t.Fatalf("parallel=%v: %v", parallel, err)
		}
		defer o.Close()
		names := map[ebpf.MapID]string{}
		for name, id := range o.Maps {
			names[id] = name
		}
		byProgram, sections := map[string][]string{}, map[ebpf.MapID]bool{}
		for prog, ids := range o.ProgramMaps {
			var used []string
			for _, id := range ids {
				if name, ok := names[id]; ok {
					used = append(used, name)
				} else {
					sections[id] = true
					used = append(used, "(data section)")
				}
			}
			slices.Sort(used)
			byProgram[prog] = slices.Compact(used)
		}
		return byProgram, len(sections)
	}
	seq, seqSections := uses(false)
	if len(seq["from_pod"]) < 2 || seqSections == 0 {
		t.Fatalf("loaded one after the other, from_pod uses %v and %d data sections: want maps and the constants", seq["from_pod"], seqSections)
	}
	par, parSections := uses(true)
	for prog, want := range seq {
		if got := par[prog]; !slices.Equal(got, want) {
			t.Errorf("%s uses %v loaded in parallel, %v loaded one after the other", prog, got, want)
		}
	}
	if parSections != seqSections {
		t.Errorf("%d data-section maps loaded in parallel, %d one after the other: the programs must share them", parSections, seqSections)
	}
}

// BenchmarkLoad times loading the whole object (maps and programs, no
// pins), most of an agent's start, with its programs verified in parallel
// and, interleaved, one after the other as cilium/ebpf loads them. It
// prints ms per load for both and their ratio, and logs the instructions
// the verifier walked per program (where the time goes):
//
//	go test -run XXX -bench 'Load$' -benchtime 10x ./pkg/datapath
func BenchmarkLoad(b *testing.B) {
	testenv.RequireRoot(b)
	var took [2]time.Duration
	var verified map[string]uint32
	for i := 0; i < b.N; i++ {
		for _, parallel := range []bool{i%2 == 0, i%2 != 0} {
			start := time.Now()
			o, err := datapath.LoadObject(parallel)
			if err != nil {
				b.Fatal(err)
			}
			if parallel {
				took[1] += time.Since(start)
			} else {
				took[0] += time.Since(start)
			}
			verified = o.Verified
			o.Close()
		}
	}
	names := slices.SortedFunc(maps.Keys(verified), func(a, b string) int { return cmp.Compare(verified[b], verified[a]) })
	total := uint32(0)
	for _, n := range names {
		total += verified[n]
	}
	for _, n := range names {
		b.Logf("%-18s %8d instructions verified (%4.1f%%)", n, verified[n], 100*float64(verified[n])/float64(total))
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(took[0]), "ms/sequential")
	b.ReportMetric(ms(took[1]), "ms/parallel")
	b.ReportMetric(ms(took[1])/ms(took[0]), "parallel/sequential")
}
