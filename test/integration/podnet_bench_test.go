package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/bench"
	"github.com/netcube/netcube/lab/kubeenv"
)

// TestPodnetQuick runs the pod-network benchmark end to end, briefly:
// netcube in its three routing modes and the real flannel (built from the
// Go module proxy by hack/build-flannel.sh) with the bridge and
// host-local plugins each carry every measurement, same node and across
// nodes, both families, and have their pod startups timed; the report,
// JSON and plots are written. It checks that the harness measures, not
// how fast anything is (figures belong in the committed report).
func TestPodnetQuick(t *testing.T) {
	testenv.RequireRoot(t)
	tools, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("NETCUBE_TOOLS_DIR", tools)
	out := t.TempDir()
	var log strings.Builder
	cfg := bench.PodnetConfig{BinDir: binDir, Runs: 1, Duration: 500 * time.Millisecond, Startups: 3, OutDir: out, Log: &log,
		Sandboxes: []string{testenv.Name("w"), testenv.Name("x"), testenv.Name("y"), testenv.Name("z")}}
	rep, err := bench.RunPodnet(cfg)
	t.Logf("benchmark log:\n%s", log.String())
	if err != nil {
		t.Fatal(err)
	}
	// Every peer: 2 families × 2 placements; the bare veth pair: same
	// node, 2 families.
	if len(rep.Points) != len(bench.PodnetPeers)*4+2 {
		t.Fatalf("%d points, want %d", len(rep.Points), len(bench.PodnetPeers)*4+2)
	}
	for _, p := range rep.Points {
		if p.Peer == bench.BareVeth {
			if len(p.RR) != 1 || p.RR[0].PerSec <= 0 || p.RR[0].P99 <= 0 || len(p.CRR) != 1 || p.CRR[0].PerSec <= 0 {
				t.Errorf("the bare veth pair, %s: figures missing: %+v", p.Family, p)
			}
			continue
		}
		if len(p.Bulk1) != 1 || p.Bulk1[0] <= 0 || p.Bulk4[0] <= 0 || p.CPUPerG[0] <= 0 ||
			p.RR[0].PerSec <= 0 || p.RR[0].P99 <= 0 || p.CRR[0].PerSec <= 0 {
			t.Errorf("%s %s %s: figures missing: %+v", p.Peer, p.Family, p.Placement, p)
		}
	}
	for _, peer := range bench.PodnetPeers {
		if len(rep.StartupMs[peer]) != cfg.Startups {
			t.Errorf("%s: %d pod startups timed, want %d", peer, len(rep.StartupMs[peer]), cfg.Startups)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "podnet.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "same-node pod→pod new connections/s ≥ 1.2× flannel", "a bare veth pair, new connections and request/response", "## cross-node pod→pod, IPv6", "## Pod startup"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("podnet.md lacks %q", want)
		}
	}
	if strings.Contains(string(md), "missing") {
		t.Errorf("podnet.md has missing figures:\n%s", md)
	}
	plots, _ := filepath.Glob(filepath.Join(out, "plots", "podnet-*.svg"))
	if len(plots) != 7 {
		t.Errorf("plots: %v", plots)
	}
}
