package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/lab/traffic"
)

// Adding a size to a report keeps the earlier sizes, replaces a size that
// is measured again, says when each was measured, and refuses a report
// measured with other settings (its points would not be comparable).
func TestMergeKeepsEarlierSizes(t *testing.T) {
	dir := t.TempDir()
	first := time.Date(2026, 11, 23, 0, 55, 0, 0, time.UTC)
	old := &CompareReport{MeasuredAt: first}
	old.Config.Runs, old.Config.DurationS = 3, 1
	for _, n := range []int{1, 1000, 10000} {
		for _, peer := range []string{"netcube", "iptables-nft"} {
			old.Points = append(old.Points, PeerPoint{Peer: peer, Services: n, FullSyncS: float64(n)})
		}
	}
	if err := old.Write(dir); err != nil {
		t.Fatal(err)
	}

	cfg := CompareConfig{Sizes: []int{10000, 30000}, Runs: 3, Duration: time.Second}
	r := newCompareReport(cfg)
	if err := r.keepEarlier(dir); err != nil {
		t.Fatal(err)
	}
	r.Points = append(r.Points, PeerPoint{Peer: "netcube", Services: 10000, FullSyncS: -1}, PeerPoint{Peer: "netcube", Services: 30000})

	if got, want := r.Config.Sizes, []int{1, 1000, 10000, 30000}; !slices.Equal(got, want) {
		t.Errorf("sizes %v, want %v", got, want)
	}
	if p, _ := r.point("netcube", 10000); p.FullSyncS != -1 {
		t.Errorf("10000 kept the earlier point (full sync %v), want the new one", p.FullSyncS)
	}
	if _, ok := r.point("iptables-nft", 10000); ok {
		t.Error("iptables-nft at 10000 kept from the earlier run: a size measured again must not mix runs")
	}
	if p, ok := r.point("iptables-nft", 1000); !ok || !p.MeasuredAt.Equal(first) {
		t.Errorf("iptables-nft at 1000: kept %v, measured %v; want kept, measured %v", ok, p.MeasuredAt, first)
	}
	if m := r.measured(); !strings.Contains(m, "2026-11-23 00:55 UTC (1, 1000 Services") || !strings.Contains(m, "(10000, 30000 Services") {
		t.Errorf("measured %q does not name both runs", m)
	}
	// Every session names its commit: the earlier one, which recorded
	// none, as unknown; this one as Commit.
	if len(r.Merged) != 2 || r.Merged[0].Commit != UnknownCommit || r.Merged[1].Commit != Commit() || r.Merged[1].Commit == "" {
		t.Errorf("sessions %+v: want the earlier one's commit %q, this one's %q", r.Merged, UnknownCommit, Commit())
	}

	other := newCompareReport(CompareConfig{Sizes: []int{30000}, Runs: 5, Duration: time.Second})
	if err := other.keepEarlier(dir); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("merging runs of 5 into runs of 3: err %v, want a refusal", err)
	}
}

// A figure that was not measured is missing, never a ratio of 0 that
// passes an "at most" target.
func TestMissingFigureIsNotARatio(t *testing.T) {
	r := &CompareReport{}
	kp := PeerPoint{Peer: "iptables-nft", Services: 10000}
	nc := PeerPoint{Peer: "netcube", Services: 10000}
	for range familyNames {
		run := Run{RR: map[string]traffic.Summary{pathService: {StdDev: 50, P99: 100}, pathDirect: {StdDev: 40, P99: 90}}}
		kp.Families = append(kp.Families, FamilyFigures{Runs: []Run{run}, ReactionUpMs: []float64{500}})
		nc.Families = append(nc.Families, FamilyFigures{}) // no runs: nothing measured
	}
	r.Points = []PeerPoint{nc, kp}
	if v, ok := r.ratio("rr-stddev", "iptables-nft", 10000, 0); ok {
		t.Errorf("ratio %v of a missing figure", v)
	}
	var b strings.Builder
	r.writeTargets(&b)
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "std-dev ratio") || strings.Contains(l, "endpoint change") {
			if !strings.Contains(l, "| missing | not measured |") {
				t.Errorf("row %q: want the figure missing, not measured", l)
			}
		}
	}
}

// The full sync's split is shown per size with the agent's share; a size
// measured before the split was recorded shows dashes, not zeros.
func TestSyncSplitTable(t *testing.T) {
	r := newCompareReport(CompareConfig{Sizes: []int{1000, 100000}, Runs: 1, Duration: time.Second})
	r.Points = []PeerPoint{
		{Peer: "netcube", Services: 1000, FullSyncS: 1},
		{Peer: "netcube", Services: 100000, FullSyncS: 16, SyncControlPlaneCPUS: 7.5, SyncSplit: &FullSyncSplit{LoadS: 1, FirstObjectS: 4, ListsS: 6, ApplyS: 3, ServedS: 2,
			Phases: SyncSplit{ListMS: 9000, DecodeMS: 1000, ConvertMS: 500, ComputeMS: 1000, MapWriteMS: 2000}}},
	}
	var b strings.Builder
	r.writeSyncSplit(&b)
	out := b.String()
	if !strings.Contains(out, "| 1000 | – |") {
		t.Errorf("a size without a split is not shown as dashes:\n%s", out)
	}
	// agent: 1 + 1 + 0.5 + 1 + 2 = 5.5 s of 16: 34%.
	if !strings.Contains(out, "| 100000 | 16.00 | 1.00 | 4.00 | 6.00 | 3.00 | 2.00 | 9.00 | 1.00 | 0.50 | 1.00 | 2.00 | 34% | 7.50 |") {
		t.Errorf("100000's row is wrong:\n%s", out)
	}
}

// A report whose kube-proxy changes were timed only up to a size says so
// when it goes beyond it, and not otherwise.
func TestKubeProxyChangesMaxSaid(t *testing.T) {
	const said = "kube-proxy's endpoint changes and rolling update are timed up to 10000 Services"
	for _, c := range []struct {
		sizes      []int
		changesMax int
		want       bool
	}{
		{[]int{1000, 30000}, 10000, true},
		{[]int{1000, 10000}, 10000, false},
		{[]int{1000, 30000}, 0, false},
	} {
		r := newCompareReport(CompareConfig{Sizes: c.sizes, Runs: 1, Duration: time.Second, KubeProxyChangesMax: c.changesMax})
		for _, n := range c.sizes {
			r.Points = append(r.Points, PeerPoint{Peer: "netcube", Services: n, FullSyncS: 1})
		}
		if got := strings.Contains(r.Markdown(nil), said); got != c.want {
			t.Errorf("sizes %v, changes timed up to %d: the report says so: %v, want %v", c.sizes, c.changesMax, got, c.want)
		}
	}
}

// netcube's Service path over pod->pod is shown per size with pod->pod's
// own spread beside it; a size netcube was not measured at shows dashes.
func TestCeilingRatiosShowTheSpread(t *testing.T) {
	r := newCompareReport(CompareConfig{Sizes: []int{1000, 30000}, Runs: 3, Duration: time.Second})
	nc := PeerPoint{Peer: "netcube", Services: 1000}
	for range familyNames {
		var f FamilyFigures
		// pod->pod p99 runs 20, 25, 30 µs (median 25, spread 10/25 = 40%);
		// the Service path's 27, 30, 24 (median 27): 27/25 = 1.080.
		for i, d := range []float64{20, 25, 30} {
			f.Runs = append(f.Runs, Run{RR: map[string]traffic.Summary{pathDirect: {P99: d}, pathService: {P99: []float64{27, 30, 24}[i]}}})
		}
		nc.Families = append(nc.Families, f)
	}
	r.Points = []PeerPoint{nc, {Peer: "iptables-nft", Services: 30000}}
	var b strings.Builder
	r.writeCeilingRatios(&b)
	out := b.String()
	// new conn/s and bulk were not measured here: missing, not a ratio.
	if !strings.Contains(out, "| 1000 | – | 1.080 [40%] | – | – |") {
		t.Errorf("1000's row is wrong:\n%s", out)
	}
	if !strings.Contains(out, "| 30000 | – | – | – | – |") {
		t.Errorf("a size netcube was not measured at is not dashes:\n%s", out)
	}
	if got := runSpread([]float64{20, 25, 30}); got != 0.4 {
		t.Errorf("runSpread = %v, want 0.4", got)
	}
}

// A rolling update that was not run (kube-proxy above
// --kube-proxy-changes-max) is missing from the report, not 0 errors;
// one that ran without an error is 0.
func TestChurnNotRunIsMissing(t *testing.T) {
	r := newCompareReport(CompareConfig{Sizes: []int{30000}, Runs: 1, Duration: time.Second})
	ran := traffic.Summary{Requests: 75000, P99: 260, Max: 7500}
	r.Points = []PeerPoint{
		{Peer: "netcube", Services: 30000, Families: []FamilyFigures{{Churn: ran}, {Churn: ran}}},
		{Peer: "iptables-nft", Services: 30000, Families: []FamilyFigures{{}, {}}},
	}
	out := r.Markdown(nil)
	for _, title := range []string{"e. Client errors during a rolling update", "e. Request latency p99 during a rolling update", "e. Request latency maximum during a rolling update"} {
		i := strings.Index(out, "## "+title)
		if i < 0 {
			t.Fatalf("no table %q", title)
		}
		row := out[i:]
		row = row[strings.Index(row, "| 30000 |"):]
		row = row[:strings.Index(row, "\n")]
		want := map[string]string{
			"e. Client errors during a rolling update":           "| 30000 | 0 | – |",
			"e. Request latency p99 during a rolling update":     "| 30000 | 260 | – |",
			"e. Request latency maximum during a rolling update": "| 30000 | 7500 | – |",
		}[title]
		if row != want {
			t.Errorf("%s: row %q, want %q", title, row, want)
		}
	}
}
