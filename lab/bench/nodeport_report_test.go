package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/lab/bench/native"
)

func npTestReport() *NodePortReport {
	pt := func(mode, fam string, delivered float64, gbps, p99 float64) NodePortPoint {
		p := NodePortPoint{Mode: mode, Family: fam}
		for i := range 3 {
			d := delivered * (1 + 0.01*float64(i))
			p.PPS = append(p.PPS, NodePortPPS{Seconds: 3, Generated: 2e6, Offered: 1.9e6, Refused: 0.1e6, Forwarded: d, Delivered: d})
			p.TCP = append(p.TCP, gbps)
			p.RR = append(p.RR, native.Result{Ops: 1000, P50: p99 / 2, P99: p99})
		}
		return p
	}
	r := &NodePortReport{RunHeader: RunHeader{Commit: "0123456789ab", MeasuredAt: time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC), Machine: "vm (kernel 6.18, 2 CPUs)",
		Runs: 3, DurationS: 3, Command: "bin/netcube-lab bench nodeport --modes tc,kube-proxy-iptables"},
		Modes: []string{NodePortTC, NodePortKubeProxy}, Families: []string{"IPv4", "IPv6"},
		SenderPPS:   map[string]float64{"IPv4": 3e6, "IPv6": 2e6},
		NotMeasured: map[string]string{NodePortXDPDSR: "not measured in this run (--modes tc,kube-proxy-iptables)", NodePortXDP: "not measured in this run (--modes tc,kube-proxy-iptables)"},
		Points: []NodePortPoint{
			pt(NodePortTC, "IPv4", 1e6, 5, 40), pt(NodePortTC, "IPv6", 0.9e6, 4.5, 42),
			pt(NodePortKubeProxy, "IPv4", 0.5e6, 3, 50), pt(NodePortKubeProxy, "IPv6", 1.95e6, 2.8, 55),
		},
	}
	return r
}

func TestNodePortMarkdown(t *testing.T) {
	md := npTestReport().Markdown()
	for _, want := range []string{
		"commit 0123456789ab",
		"| metric | tc | xdp | xdp-dsr | kube-proxy-iptables | kube-proxy-iptables / tc |",
		"| packets/s delivered to the backend pod (Mpps) | 1.010 [1.000–1.020] | not measured | not measured | 0.505 [0.500–0.510] | 0.50× |",
		"**Not measured in this run (--modes tc,kube-proxy-iptables).**",
		"makes 3.000 Mpps IPv4, 2.000 Mpps IPv6.",
		"| tc | IPv4 | 2.94 | 0.100 | yes |",
		// The sender alone makes 2.0e6, the path delivered up to 1.989e6.
		"| kube-proxy-iptables | IPv6 | 1.01 | 0.100 | **no**, in 3 of 3 runs",
		"plots/nodeport-accel-pps.svg",
		"Command: `bin/netcube-lab bench nodeport --modes tc,kube-proxy-iptables`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| xdp | IPv4") {
		t.Error("the sender check lists a mode not measured")
	}
}

func TestNodePortWrite(t *testing.T) {
	dir := t.TempDir()
	r := npTestReport()
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := LoadNodePortReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Markdown() != r.Markdown() {
		t.Error("the report rendered from nodeport.json differs from the one written")
	}
	for _, k := range npPlotted {
		svg, err := os.ReadFile(filepath.Join(dir, "plots", "nodeport-accel-"+k+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(string(svg), "n/m") || !strings.Contains(string(svg), "commit 0123456789ab") {
			t.Errorf("plot %s: no bars, no not-measured mark or no commit:\n%s", k, svg)
		}
	}
}
