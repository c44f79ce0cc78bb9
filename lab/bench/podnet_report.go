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

// podnetMetric is one figure of a point: its runs, and whether more is
// better.
type podnetMetric struct {
	key, title, unit string
	higher           bool
	format           string
	runs             func(PodnetPoint) []float64
}

func ncField(rs []native.Result, f func(native.Result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

var podnetMetrics = []podnetMetric{
	{"bulk1", "TCP bulk, 1 stream", "Gbit/s", true, "%.2f", func(p PodnetPoint) []float64 { return p.Bulk1 }},
	{"bulk4", "TCP bulk, 4 streams", "Gbit/s", true, "%.2f", func(p PodnetPoint) []float64 { return p.Bulk4 }},
	{"cpu", "CPU per Gbit/s, 1 stream (busy CPU-seconds per Gbit, whole machine)", "CPU-s/Gbit", false, "%.3f", func(p PodnetPoint) []float64 { return p.CPUPerG }},
	{"rr", "request/response rate", "trans/s", true, "%.0f", func(p PodnetPoint) []float64 {
		return ncField(p.RR, func(r native.Result) float64 { return r.PerSec })
	}},
	{"rr-p50", "request/response p50", "µs", false, "%.1f", func(p PodnetPoint) []float64 {
		return ncField(p.RR, func(r native.Result) float64 { return r.P50 })
	}},
	{"rr-p99", "request/response p99", "µs", false, "%.1f", func(p PodnetPoint) []float64 {
		return ncField(p.RR, func(r native.Result) float64 { return r.P99 })
	}},
	{"crr", "new connections (connect, request, answer, close)", "conn/s", true, "%.0f", func(p PodnetPoint) []float64 {
		return ncField(p.CRR, func(r native.Result) float64 { return r.PerSec })
	}},
}

func pctl(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	return s[int(math.Ceil(p*float64(len(s))))-1]
}

func (r *PodnetReport) point(peer, fam, placement string) (PodnetPoint, bool) {
	for _, p := range r.Points {
		if p.Peer == peer && p.Family == fam && p.Placement == placement {
			return p, true
		}
	}
	return PodnetPoint{}, false
}

// ratio is netcube's median over flannel's, oriented so that > 1 is
// better for netcube; NaN when either is missing.
func (r *PodnetReport) ratio(peer, fam, placement string, m podnetMetric) float64 {
	a, okA := r.point(peer, fam, placement)
	b, okB := r.point(PeerFlannel, fam, placement)
	if !okA || !okB {
		return math.NaN()
	}
	x, y := med(m.runs(a)), med(m.runs(b))
	if x == 0 || y == 0 {
		return math.NaN()
	}
	if m.higher {
		return x / y
	}
	return y / x
}

// bareTarget: netcube-native's same-node new connections and
// request/response rate against the bare veth pair's, measured in the
// same runs, with the pair's own spread (its largest run over its
// smallest) beside them: a ratio within that spread is not resolved.
func (r *PodnetReport) bareTarget() target {
	const want = 0.97
	var parts []string
	ok, missing := true, false
	for _, fam := range []string{"IPv4", "IPv6"} {
		nc, okN := r.point(PeerNetcubeNative, fam, "same-node")
		bare, okB := r.point(BareVeth, fam, "same-node")
		for _, key := range []string{"crr", "rr"} {
			m := metricByKey(key)
			x, y := m.runs(nc), m.runs(bare)
			if !okN || !okB || len(x) == 0 || len(y) == 0 || med(y) == 0 {
				missing = true
				continue
			}
			ratio := med(x) / med(y)
			ok = ok && ratio >= want
			parts = append(parts, fmt.Sprintf("%s %s %.2f× (pair's runs spread %.0f%%)", fam, m.unit, ratio, 100*(slices.Max(y)/slices.Min(y)-1)))
		}
	}
	return target{fmt.Sprintf("same-node pod→pod ≥ %.2f× a bare veth pair, new connections and request/response, netcube-native", want),
		strings.Join(parts, ", "), metWord(ok, missing)}
}

func metricByKey(k string) podnetMetric {
	for _, m := range podnetMetrics {
		if m.key == k {
			return m
		}
	}
	panic(k)
}

type target struct{ what, measured, met string }

func metWord(ok bool, missing bool) string {
	switch {
	case missing:
		return "missing"
	case ok:
		return "**yes**"
	}
	return "no"
}

func (r *PodnetReport) targets() []target {
	var out []target
	for _, t := range []struct {
		what, metric string
		min          float64
	}{
		{"same-node pod→pod new connections/s ≥ 1.2× flannel", "crr", 1.2},
		{"same-node pod→pod 1-stream throughput ≥ 1.1× flannel", "bulk1", 1.1},
	} {
		var parts []string
		ok, missing := true, false
		for _, fam := range []string{"IPv4", "IPv6"} {
			x := r.ratio(PeerNetcubeNative, fam, "same-node", metricByKey(t.metric))
			missing = missing || math.IsNaN(x)
			ok = ok && x >= t.min
			parts = append(parts, fmt.Sprintf("%s %.3f×", fam, x))
		}
		out = append(out, target{t.what, strings.Join(parts, ", "), metWord(ok, missing)})
	}
	for _, peer := range []string{PeerNetcubeNative, PeerNetcubeVXLAN} {
		var worst []string
		ok, missing := true, false
		for _, fam := range []string{"IPv4", "IPv6"} {
			for _, m := range podnetMetrics {
				x := r.ratio(peer, fam, "cross-node", m)
				if math.IsNaN(x) {
					missing = true
					continue
				}
				if x < 1 {
					ok = false
					worst = append(worst, fmt.Sprintf("%s %s %.3f×", fam, m.key, x))
				}
			}
		}
		measured := "every metric ≥ 1.00×"
		if missing {
			measured = "not measured (a figure is missing)"
		}
		if len(worst) > 0 {
			measured = "below: " + strings.Join(worst, ", ")
		}
		out = append(out, target{fmt.Sprintf("cross-node, %s ≥ flannel (VXLAN) on every metric", peer), measured, metWord(ok, missing)})
	}
	out = append(out, r.bareTarget())
	ms := r.StartupMs[PeerNetcubeNative]
	p99 := pctl(ms, 0.99)
	out = append(out, target{"pod startup (CNI ADD) p99 < 50 ms", fmt.Sprintf("p99 %.1f ms over %d pods (flannel's bridge: %.1f ms)", p99, len(ms), pctl(r.StartupMs[PeerFlannel], 0.99)),
		metWord(p99 < 50, math.IsNaN(p99))})
	return out
}

// Markdown renders podnet.md.
func (r *PodnetReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# netcube pod network vs flannel\n\n")
	fmt.Fprintf(&b, "Measured %s, netcube commit %s, on %s; %d runs of %.0fs per figure, medians [min–max]; every peer's sandbox up at once and measured in turn within each run. Command: `%s`.\n\n",
		r.MeasuredAt.Format("2006-01-02 15:04 UTC"), r.Commit, r.Machine, r.Runs, r.DurationS, r.Command)
	b.WriteString("Peers, each on the same sandbox topology (2 nodes on one underlay bridge, 2 pods each):\n\n")
	b.WriteString("- **netcube-native**: netcube's CNI plugin and router cube, native routing (same node: `bpf_redirect_peer` into the pod; other node: FIB redirect onto the underlay).\n")
	b.WriteString("- **netcube-vxlan**: the same with the VXLAN overlay (`--routing vxlan`).\n")
	b.WriteString("- **netcube-kernel**: netcube's CNI plugin and programs, but the kernel routes every pod packet (`--routing kernel`): the stack-routed path before the router cube.\n")
	b.WriteString("- **flannel**: flanneld (VXLAN backend, kube subnet manager against a real kube-apiserver; built by `hack/build-flannel.sh`) with the reference `bridge` and `host-local` plugins: the kernel bridge/VXLAN path most clusters run.\n\n")
	b.WriteString("Generator: `ncperf` (native, `lab/bench/native`), client and server on CPU 1. Bulk: iperf3, client CPU 0, server CPU 1.\n\n")
	b.WriteString("The reference is a **bare veth pair** between two namespaces (no routing, no program, no bridge), measured in every run before the peers:")
	for _, fam := range []string{"IPv4", "IPv6"} {
		pt, _ := r.point(BareVeth, fam, "same-node")
		crr, rr := metricByKey("crr").runs(pt), metricByKey("rr").runs(pt)
		if len(crr) == 0 || len(rr) == 0 {
			fmt.Fprintf(&b, " %s not measured;", fam)
			continue
		}
		fmt.Fprintf(&b, " %s %.0f [%.0f–%.0f] conn/s and %.0f [%.0f–%.0f] trans/s;", fam,
			med(crr), slices.Min(crr), slices.Max(crr), med(rr), slices.Min(rr), slices.Max(rr))
	}
	b.WriteString(" a pod network's same-node path can come close to it but adds work to it, so a figure above it says how far the machine moved between the two measurements.\n\n")

	b.WriteString("## Targets\n\n| target | measured | met |\n|---|---|---|\n")
	for _, t := range r.targets() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.what, t.measured, t.met)
	}
	peers := r.peers()
	for _, pl := range []string{"same-node", "cross-node"} {
		for _, fam := range []string{"IPv4", "IPv6"} {
			fmt.Fprintf(&b, "\n## %s pod→pod, %s\n\n| metric |", pl, fam)
			for _, p := range peers {
				fmt.Fprintf(&b, " %s |", p)
			}
			for _, p := range peers {
				if p != PeerFlannel {
					fmt.Fprintf(&b, " %s / flannel |", p)
				}
			}
			b.WriteString("\n|---|")
			for range len(peers)*2 - 1 {
				b.WriteString("---:|")
			}
			b.WriteString("\n")
			for _, m := range podnetMetrics {
				fmt.Fprintf(&b, "| %s (%s) |", m.title, m.unit)
				for _, peer := range peers {
					pt, ok := r.point(peer, fam, pl)
					xs := m.runs(pt)
					if !ok || len(xs) == 0 {
						b.WriteString(" missing |")
						continue
					}
					fmt.Fprintf(&b, " "+m.format+" ["+m.format+"–"+m.format+"] |", med(xs), slices.Min(xs), slices.Max(xs))
				}
				for _, peer := range peers {
					if peer != PeerFlannel {
						fmt.Fprintf(&b, " %.2f× |", r.ratio(peer, fam, pl, m))
					}
				}
				b.WriteString("\n")
			}
		}
	}
	b.WriteString("\nRatios are oriented so that above 1 is better for netcube (latency and CPU: flannel's over netcube's).\n")
	b.WriteString("\n## Pod startup: CNI ADD (ms)\n\n| peer | pods | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n")
	for _, p := range peers {
		ms := r.StartupMs[p]
		if len(ms) == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %.1f |\n", p, len(ms), med(ms), pctl(ms, 0.99), slices.Max(ms))
	}
	crr := metricByKey("crr")
	fl, _ := r.point(PeerFlannel, "IPv4", "same-node")
	nc, _ := r.point(PeerNetcubeNative, "IPv4", "same-node")
	bare, _ := r.point(BareVeth, "IPv4", "same-node")
	f, n, c := med(crr.runs(fl)), med(crr.runs(nc)), med(crr.runs(bare))
	b.WriteString("\n## What bounds these figures\n\n")
	fmt.Fprintf(&b, `- **Same node**, every peer runs two full TCP stacks (one per pod) on one CPU; only the
  routing step differs (netcube: one tc program and a redirect into the peer; flannel:
  veth, the bridge, veth). 1.2× flannel's %.0f conn/s (IPv4) is %.0f conn/s: %.0f%% of the
  %.0f conn/s a bare veth pair does with no routing at all; netcube-native does %.0f%%.
  Where netcube's extra time per packet goes (its program, its map lookups, the tc hook
  and the redirect), and what the same hook costs with an empty program:
  [podnet-profile.md](podnet-profile.md).
`, f, 1.2*f, 100*1.2*f/c, c, 100*n/c)
	b.WriteString(`- **VXLAN across nodes**: netcube's overlay encapsulates in the same kernel VXLAN device
  flannel uses (collect-metadata mode, the remote end set per packet by to_overlay), so
  bulk throughput and its CPU cost are the device's; netcube saves the bridge and the
  host stack on each side, which shows in request/response and connection rate.
- **Pod startup** (CNI ADD, measured through libcni as a runtime calls it, the plugin run
  in the node's namespace): the pod veth's two programs are tc filters, which attach
  without waiting for an RCU grace period as tcx links do; the
  two attaches alone: ` + "`go test -run XXX -bench AttachPod ./pkg/datapath`" + ` (ms/pod). The
  rest is the plugin's process start, netlink and the address store.
`)
	b.WriteString("\nReproduce: `make bench-podnet`. Plots: `plots/podnet-*.svg`.\n")
	return b.String()
}

func (r *PodnetReport) peers() []string {
	var out []string
	for _, p := range PodnetPeers {
		has := len(r.StartupMs[p]) > 0
		for _, pt := range r.Points {
			has = has || pt.Peer == p
		}
		if has {
			out = append(out, p)
		}
	}
	return out
}

// RenderPodnet writes podnet.md and the plots again from dir's
// podnet.json.
func RenderPodnet(dir string) (*PodnetReport, error) {
	b, err := os.ReadFile(filepath.Join(dir, "podnet.json"))
	if err != nil {
		return nil, err
	}
	var r PodnetReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "podnet.json"), err)
	}
	return &r, r.write(dir)
}

func (r *PodnetReport) write(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "podnet.json"), b, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "podnet.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	for _, m := range podnetMetrics {
		if err := os.WriteFile(filepath.Join(dir, "plots", "podnet-"+m.key+".svg"), []byte(r.barPlot(m)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// barPlot draws one metric's medians: a group of bars (one per peer) for
// each placement and family.
func (r *PodnetReport) barPlot(m podnetMetric) string {
	peers := r.peers()
	colors := []string{"#1f77b4", "#2ca02c", "#9467bd", "#d62728"}
	type group struct {
		label string
		vals  []float64
	}
	var groups []group
	top := 0.0
	for _, pl := range []string{"same-node", "cross-node"} {
		for _, fam := range []string{"IPv4", "IPv6"} {
			g := group{label: pl + " " + fam}
			for _, peer := range peers {
				pt, _ := r.point(peer, fam, pl)
				v := med(m.runs(pt))
				if math.IsNaN(v) {
					v = 0
				}
				g.vals = append(g.vals, v)
				top = math.Max(top, v)
			}
			groups = append(groups, g)
		}
	}
	if top == 0 {
		top = 1
	}
	const w, h, left, bottom = 760, 360, 70, 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">%s (%s)%s</text>`+"\n", left, escape(m.title), escape(m.unit), map[bool]string{true: ", higher is better", false: ", lower is better"}[m.higher])
	plotH := float64(h - bottom - 30)
	gw := float64(w-left-10) / float64(len(groups))
	bw := gw * 0.8 / float64(max(1, len(peers)))
	for i := 0; i <= 4; i++ {
		y := float64(h-bottom) - plotH*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, w-10, y, y, left-4, y+4, tick(top*float64(i)/4))
	}
	for gi, g := range groups {
		x0 := float64(left) + gw*float64(gi) + gw*0.1
		for pi, v := range g.vals {
			bh := plotH * v / top
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
				x0+bw*float64(pi), float64(h-bottom)-bh, bw-2, bh, colors[pi%len(colors)])
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x0+gw*0.4, h-bottom+16, escape(g.label))
	}
	for pi, p := range peers {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			left+pi*160, h-20, colors[pi%len(colors)], left+pi*160+14, h-11, escape(p))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
