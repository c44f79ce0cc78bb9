package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/netcube/netcube/lab/bench/native"
)

// npMetric is one figure of a nodeport point.
type npMetric struct {
	key, title, unit string
	higher           bool
	format           string
	scale            float64 // the runs' values are divided by it
	runs             func(NodePortPoint) []float64
}

func ppsField(ps []NodePortPPS, f func(NodePortPPS) float64) []float64 {
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = f(p)
	}
	return out
}

var npMetrics = []npMetric{
	{"pps", "packets/s delivered to the backend pod", "Mpps", true, "%.3f", 1e6, func(p NodePortPoint) []float64 {
		return ppsField(p.PPS, func(s NodePortPPS) float64 { return s.Delivered })
	}},
	{"forwarded", "packets/s node1 forwarded to node2", "Mpps", true, "%.3f", 1e6, func(p NodePortPoint) []float64 {
		return ppsField(p.PPS, func(s NodePortPPS) float64 { return s.Forwarded })
	}},
	{"xdp", "packets/s node1's XDP program sent back out (XDP_TX)", "Mpps", true, "%.3f", 1e6, func(p NodePortPoint) []float64 {
		return ppsField(p.PPS, func(s NodePortPPS) float64 { return s.XDPForwarded })
	}},
	{"offered", "packets/s offered (taken by the client's wire)", "Mpps", true, "%.3f", 1e6, func(p NodePortPoint) []float64 {
		return ppsField(p.PPS, func(s NodePortPPS) float64 { return s.Offered })
	}},
	{"generated", "packets/s generated", "Mpps", true, "%.3f", 1e6, func(p NodePortPoint) []float64 {
		return ppsField(p.PPS, func(s NodePortPPS) float64 { return s.Generated })
	}},
	{"tcp", "TCP bulk, 1 stream (iperf3)", "Gbit/s", true, "%.2f", 1, func(p NodePortPoint) []float64 { return p.TCP }},
	{"rr-p50", "request/response p50 (ncperf)", "µs", false, "%.1f", 1, func(p NodePortPoint) []float64 {
		return ncField(p.RR, func(r native.Result) float64 { return r.P50 })
	}},
	{"rr-p99", "request/response p99 (ncperf)", "µs", false, "%.1f", 1, func(p NodePortPoint) []float64 {
		return ncField(p.RR, func(r native.Result) float64 { return r.P99 })
	}},
}

// npPlotted are the metrics with a plot (plots/nodeport-accel-KEY.svg).
var npPlotted = []string{"pps", "tcp", "rr-p99"}

func (m npMetric) values(p NodePortPoint) []float64 {
	vs := m.runs(p)
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = v / m.scale
	}
	return out
}

func (r *NodePortReport) point(mode, fam string) (NodePortPoint, bool) {
	for _, p := range r.Points {
		if p.Mode == mode && p.Family == fam && len(p.PPS) > 0 {
			return p, true
		}
	}
	return NodePortPoint{}, false
}

// rows are the report's modes: the measured ones, those not measured (a
// reason each), and xdp-dsr.
func (r *NodePortReport) rows() []string {
	rows := slices.Clone(NodePortModes)
	for _, m := range r.Modes {
		if !slices.Contains(rows, m) {
			rows = append(rows, m)
		}
	}
	return rows
}

func npSpread(xs []float64, format string) string {
	if len(xs) == 0 {
		return "—"
	}
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", med(xs), slices.Min(xs), slices.Max(xs))
}

var npModeText = map[string]string{
	NodePortTC: "netcube's agents with `--nodeport-acceleration=none`: the tc program on node1's uplink balances the NodePort (`bpf/entry/tc_node.c`) and FIB-redirects to node2.",
	NodePortXDP: "`--nodeport-acceleration=xdp`: an XDP program on node1's uplink balances the NodePort packets whose backend is on another node (DNAT + SNAT) and sends them back out with XDP_TX; everything else passes to the tc program. " +
		"On these veths it runs on the skb the bridge sent (veth's skb path: turned into an XDP buffer, copied when it must be), and the frame it sends out becomes an skb again at the underlay's end (`n1`): most of the skb costs a NIC's XDP saves stay.",
	NodePortKubeProxy: "the real kube-proxy (iptables mode, nft backend) on node1, its netcube agent stopped and its pins removed (netcube's datapath cannot leave a Service to kube-proxy on a node it runs; as bench compare and slices do); node2 keeps netcube (tc). kube-proxy reads a kube-apiserver and etcd the bench runs on node1's loopback.",
	NodePortXDPDSR:    "`--nodeport-acceleration=xdp --nodeport-mode=dsr`: XDP DNATs to the backend on node2 but keeps the client as the source and writes the frontend into the packet (an IPv4 option, 8 bytes, or an IPv6 destination options header, 24: on every UDP datagram, on a TCP flow's SYN); node2 answers the client itself from the frontend's address, so replies skip node1.",
}

// Markdown renders the report.
func (r *NodePortReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# netcube NodePort from outside the cluster: tc, XDP, kube-proxy\n\n")
	fmt.Fprintf(&b, "Measured %s, netcube %s, on %s; %d runs of %gs per figure, medians [min–max]; the modes switched within each run (%s, in turn). ",
		r.MeasuredAt.UTC().Format("2006-01-02 15:04 UTC"), commitName(r.Commit), r.Machine, r.Runs, r.DurationS, strings.Join(r.Modes, ", "))
	if r.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`.", r.Command)
	}
	b.WriteString("\n\n")
	b.WriteString("The path: a client outside the cluster (its own namespace on the underlay bridge) → node1's address and NodePort → the backend pod on node2 " +
		"(`externalTrafficPolicy: Cluster`: node1 DNATs to the pod and SNATs to itself, and replies come back through node1, except in xdp-dsr, where node2 answers the client itself). Two nodes, native routing, a pod each.\n\n")
	b.WriteString("Modes:\n\n")
	for _, m := range r.rows() {
		fmt.Fprintf(&b, "- **%s**: %s", m, npModeText[m])
		if why, ok := r.NotMeasured[m]; ok {
			fmt.Fprintf(&b, " **%s.**", strings.TrimSuffix(capitalize(why), "."))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nWhat each run measures, per mode and family:\n\n")
	fmt.Fprintf(&b, "- **packets/s**: `lab/bench/xdpgen`'s generator in the client's namespace sends UDP frames (60 bytes IPv4, 80 IPv6) to node1's NodePort %d, "+
		"the source port cycling over %d values (so %d flows: a few new ones, then established), with `BPF_PROG_TEST_RUN` in live-frames mode "+
		"(`BPF_F_TEST_XDP_LIVE_FRAMES`, XDP_TX out of the client's eth0), on CPU 0, after a 0.3 s warm-up. ", npPPSNodePort, npSrcPorts, npSrcPorts)
	b.WriteString("The path runs on the sender's CPU: the kernel carries each batch of frames through it before the generator makes the next, so the sender offers what the path takes (generated = offered ≈ delivered below) and the rate is what the whole path (bridge, node1, node2, the pod) costs on one CPU, the sender's own share included. " +
		"That the sender can exceed the path is measured apart, before the sandbox: the generator alone, into a bare veth pair whose far end drops in XDP, makes ")
	var fams []string
	for _, f := range r.Families {
		fams = append(fams, fmt.Sprintf("%.3f Mpps %s", r.SenderPPS[f]/1e6, f))
	}
	b.WriteString(strings.Join(fams, ", ") + ". " +
		"(Handing the path to CPU 1 instead, by RPS or threaded NAPI on the client's wire, made it collapse under the overload, to 10–50 kpps: every veth hop queues on that CPU's one backlog, which the flood fills.) ")
	b.WriteString("*Delivered*: counted by an XDP program (generic mode) on the backend pod's eth0 that counts and drops UDP to the Service's port; " +
		"*forwarded*: node1's packets to node2 (the underlay port towards node2, `n2`, tx); *offered*: frames the client's wire took (`ext` rx); " +
		"*generated*: the generator's own count (what the wire did not take is `ext`'s rx_dropped: *refused*).\n")
	b.WriteString("- **throughput**: iperf3, one TCP stream from the client to the NodePort, client CPU 0, server CPU 1.\n")
	b.WriteString("- **latency**: `ncperf rr` (one connection, 1 byte each way; `lab/bench/native`) from the client to the NodePort, client and server on CPU 1; the client with `tcp_tw_reuse=1` and ports 1024–65000.\n\n")

	for _, fam := range r.Families {
		fmt.Fprintf(&b, "## %s\n\n| metric |", fam)
		rows := r.rows()
		for _, m := range rows {
			fmt.Fprintf(&b, " %s |", m)
		}
		for _, m := range rows[1:] {
			if _, ok := r.point(m, fam); ok {
				fmt.Fprintf(&b, " %s / tc |", m)
			}
		}
		b.WriteString("\n|---|")
		for range rows {
			b.WriteString("---:|")
		}
		for _, m := range rows[1:] {
			if _, ok := r.point(m, fam); ok {
				b.WriteString("---:|")
			}
		}
		b.WriteString("\n")
		for _, mt := range npMetrics {
			fmt.Fprintf(&b, "| %s (%s) |", mt.title, mt.unit)
			for _, m := range rows {
				p, ok := r.point(m, fam)
				if !ok {
					b.WriteString(" not measured |")
					continue
				}
				fmt.Fprintf(&b, " %s |", npSpread(mt.values(p), mt.format))
			}
			base, okBase := r.point(NodePortTC, fam)
			for _, m := range rows[1:] {
				p, ok := r.point(m, fam)
				if !ok {
					continue
				}
				if !okBase || med(mt.values(base)) == 0 {
					b.WriteString(" |")
					continue
				}
				fmt.Fprintf(&b, " %.2f× |", med(mt.values(p))/med(mt.values(base)))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}

	b.WriteString("## Could the sender exceed the path?\n\n")
	b.WriteString("A packets/s figure is the path's only if the sender could offer more than the path delivered. Per mode and family, the sender alone (calibration) against what the path delivered, and what the wire refused:\n\n")
	b.WriteString("| mode | family | sender alone / delivered (min over runs) | refused (Mpps, max over runs) | the sender could exceed the path in every run |\n|---|---|---:|---:|---|\n")
	for _, m := range r.rows() {
		for _, fam := range r.Families {
			p, ok := r.point(m, fam)
			if !ok {
				continue
			}
			worst, refused, short := math.Inf(1), 0.0, 0
			for _, s := range p.PPS {
				x := ratio(r.SenderPPS[fam], s.Delivered)
				worst, refused = math.Min(worst, x), math.Max(refused, s.Refused)
				if x < npExceeds {
					short++
				}
			}
			verdict := "yes"
			if short > 0 {
				verdict = fmt.Sprintf("**no**, in %d of %d runs: there the figure is the sender's, a lower bound of the path", short, len(p.PPS))
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f | %.3f | %s |\n", m, fam, worst, refused/1e6, verdict)
		}
	}
	fmt.Fprintf(&b, "\n(Could exceed: the sender alone makes at least %.2f× what was delivered.)\n\n", npExceeds)
	b.WriteString("Plots: ")
	for i, k := range npPlotted {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "[%s](plots/nodeport-accel-%s.svg)", k, k)
	}
	b.WriteString(".\n\n")
	for _, k := range npPlotted {
		fmt.Fprintf(&b, "![%s](plots/nodeport-accel-%s.svg)\n", k, k)
	}
	b.WriteString("\nReproduce: `make bench-nodeport`.\n")
	return b.String()
}

// npExceeds: the sender could exceed the path when alone it makes at
// least this many times what the path delivered.
const npExceeds = 1.05

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return a / b
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Write writes nodeport.{json,md} and the plots to dir ("": nothing).
func (r *NodePortReport) Write(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "nodeport.json"), j, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "nodeport.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	for _, m := range npMetrics {
		if slices.Contains(npPlotted, m.key) {
			if err := os.WriteFile(filepath.Join(dir, "plots", "nodeport-accel-"+m.key+".svg"), []byte(r.barPlot(m)), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// LoadNodePortReport reads dir's nodeport.json.
func LoadNodePortReport(dir string) (*NodePortReport, error) {
	b, err := os.ReadFile(filepath.Join(dir, "nodeport.json"))
	if err != nil {
		return nil, err
	}
	var r NodePortReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "nodeport.json"), err)
	}
	return &r, nil
}

var npColors = map[string]string{NodePortTC: "#1f77b4", NodePortXDP: "#2ca02c", NodePortKubeProxy: "#d62728", NodePortXDPDSR: "#9467bd"}

// barPlot draws a metric's medians: a group of bars (one per mode) per
// family; a mode not measured has no bar and says so under its group.
func (r *NodePortReport) barPlot(m npMetric) string {
	modes := r.rows()
	top := 0.0
	for _, fam := range r.Families {
		for _, mode := range modes {
			if p, ok := r.point(mode, fam); ok {
				top = math.Max(top, med(m.values(p)))
			}
		}
	}
	if top == 0 {
		top = 1
	}
	top *= 1.1
	const w, h, left, bottom = 760, 360, 70, 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="18" font-size="14">%s (%s)%s, external client→NodePort, %s</text>`+"\n",
		left, escape(m.title), escape(m.unit), map[bool]string{true: ", higher is better", false: ", lower is better"}[m.higher], commitName(r.Commit))
	plotH := float64(h - bottom - 30)
	gw := float64(w-left-10) / float64(max(1, len(r.Families)))
	bw := gw * 0.8 / float64(len(modes))
	for i := 0; i <= 4; i++ {
		y := float64(h-bottom) - plotH*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, w-10, y, y, left-4, y+4, tick(top*float64(i)/4))
	}
	for gi, fam := range r.Families {
		x0 := float64(left) + gw*float64(gi) + gw*0.1
		for mi, mode := range modes {
			x := x0 + bw*float64(mi)
			p, ok := r.point(mode, fam)
			if !ok {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="10" fill="#888">n/m</text>`+"\n", x+bw/2, h-bottom-4)
				continue
			}
			v := med(m.values(p))
			bh := plotH * v / top
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/><text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n",
				x, float64(h-bottom)-bh, bw-2, bh, npColors[mode], x+bw/2, float64(h-bottom)-bh-3, fmt.Sprintf(m.format, v))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x0+gw*0.4, h-bottom+16, escape(fam))
	}
	for mi, mode := range modes {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			left+mi*170, h-24, npColors[mode], left+mi*170+14, h-15, escape(mode))
	}
	b.WriteString(`<text x="70" y="354" font-size="10" fill="#888">n/m: not measured</text>` + "\n")
	b.WriteString("</svg>\n")
	return b.String()
}
