package integration

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/bench"
	"github.com/netcube/netcube/lab/kubeenv"
)

// TestCompareQuick runs the kube-proxy comparison end to end at tiny sizes
// (`netcube-lab bench compare --quick`): every peer (netcube and the real
// kube-proxy in its three modes) syncs, serves every scenario and is
// removed again, and the report, its JSON and plots are written. It checks
// that the harness measures, not how fast anything is (this machine is
// shared; figures belong in the committed report).
func TestCompareQuick(t *testing.T) {
	testenv.RequireRoot(t)
	tools, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var log strings.Builder
	cfg := bench.CompareConfig{
		Sizes: []int{1, 100}, Duration: time.Second, Runs: 1, Reactions: 1, MinSyncZeroMax: 1,
		ChurnFor: 2 * time.Second, ChurnEvery: 500 * time.Millisecond, SyncTimeout: 2 * time.Minute,
		BinDir: binDir, ToolsDir: tools, OutDir: out, Log: &log, Command: "test", Sandbox: testenv.Name("kb"),
	}
	rep, err := bench.Compare(cfg)
	t.Logf("benchmark log:\n%s", log.String())
	if err != nil {
		t.Fatal(err)
	}
	peers := []string{"netcube", "iptables-nft", "iptables-legacy", "nftables"}
	entries := map[string]int{}
	for _, n := range cfg.Sizes {
		for _, peer := range peers {
			p := findPoint(t, rep, peer, n)
			if p.FullSyncS <= 0 || p.CPUSeconds <= 0 || p.PeakRSSMB <= 0 {
				t.Errorf("%s at %d: control-plane figures missing: %+v", peer, n, p)
			}
			// Each other Service adds rules or entries (v4 and v6).
			if n > 1 && p.Entries < entries[peer]+2*(n-1) {
				t.Errorf("%s: %d entries at %d Services, %d at 1", peer, p.Entries, n, entries[peer])
			}
			entries[peer] = p.Entries
			checkSyncSplit(t, p)
			if len(p.Families) != 2 {
				t.Fatalf("%s at %d: families %+v", peer, n, p.Families)
			}
			for _, f := range p.Families {
				r := f.Runs[0]
				for path, g := range r.Bulk {
					if g <= 0 {
						t.Errorf("%s %s %s: %v Gbit/s", peer, f.Family, path, g)
					}
				}
				if len(r.Bulk) != 6 {
					t.Errorf("%s %s: bulk paths %v", peer, f.Family, r.Bulk)
				}
				paths := []string{"pod->pod", "pod->ClusterIP"}
				if strings.HasPrefix(peer, "iptables") {
					paths = append(paths, "pod->ClusterIP first")
				}
				for _, path := range paths {
					if v := r.RR[path]; v.PerSec <= 0 || v.Errors > 0 || v.P999 < v.P50 {
						t.Errorf("%s %s %s request/response: %s", peer, f.Family, path, v)
					}
					if v := r.CRR[path]; v.PerSec <= 0 || v.Errors > 0 {
						t.Errorf("%s %s %s new connections: %s", peer, f.Family, path, v)
					}
				}
				if len(f.ReactionUpMs) != 1 || f.ReactionUpMs[0] <= 0 || len(f.ReactionDownMs) != 1 {
					t.Errorf("%s %s: reaction %v / %v", peer, f.Family, f.ReactionUpMs, f.ReactionDownMs)
				}
				// With the minimum sync period at 0 (up to MinSyncZeroMax).
				if zero := n <= cfg.MinSyncZeroMax; zero != (len(f.MinSyncZeroUpMs) == 1 && f.MinSyncZeroUpMs[0] > 0 && len(f.MinSyncZeroDownMs) == 1) {
					t.Errorf("%s %s at %d: min-sync-period 0 reaction %v / %v", peer, f.Family, n, f.MinSyncZeroUpMs, f.MinSyncZeroDownMs)
				}
				if f.Churn.Requests == 0 {
					t.Errorf("%s %s: no requests during the rolling update", peer, f.Family)
				}
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "compare.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "### netcube / iptables-nft, IPv6", "latency std-dev", "plots/conn-rate-ipv4.svg", "## Where netcube's full sync goes"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	svgs, _ := filepath.Glob(filepath.Join(out, "plots", "*.svg"))
	if len(svgs) < 40 {
		t.Errorf("%d plots written", len(svgs))
	}
	if _, err := os.Stat(filepath.Join(out, "compare.json")); err != nil {
		t.Error(err)
	}
}

// checkSyncSplit: netcube's full sync is split from its agent's log into
// spans that add up to it (to the log's millisecond), the lists' time
// included; kube-proxy's is not split.
func checkSyncSplit(t *testing.T, p bench.PeerPoint) {
	t.Helper()
	s := p.SyncSplit
	if p.Peer != "netcube" {
		if s != nil {
			t.Errorf("%s at %d: a full sync split %+v, from no agent log", p.Peer, p.Services, s)
		}
		return
	}
	if s == nil {
		t.Errorf("netcube at %d: no full sync split", p.Services)
		return
	}
	spans := []float64{s.LoadS, s.FirstObjectS, s.ListsS, s.ApplyS, s.ServedS}
	sum := 0.0
	for _, x := range spans {
		if x < -0.002 {
			t.Errorf("netcube at %d: a negative span in %+v", p.Services, s)
		}
		sum += x
	}
	if math.Abs(sum-p.FullSyncS) > 0.005 || s.LoadS <= 0 || s.ApplyS <= 0 || s.Phases.ListMS <= 0 || s.Phases.MapWriteMS <= 0 {
		t.Errorf("netcube at %d: split %+v (spans sum to %.3f s) of a full sync of %.3f s", p.Services, s, sum, p.FullSyncS)
	}
}

func findPoint(t *testing.T, rep *bench.CompareReport, peer string, n int) bench.PeerPoint {
	t.Helper()
	for _, p := range rep.Points {
		if p.Peer == peer && p.Services == n {
			return p
		}
	}
	t.Fatalf("no point for %s at %d Services", peer, n)
	return bench.PeerPoint{}
}
