package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
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

	other := newCompareReport(CompareConfig{Sizes: []int{30000}, Runs: 5, Duration: time.Second})
	if err := other.keepEarlier(dir); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("merging runs of 5 into runs of 3: err %v, want a refusal", err)
	}
}
