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

// The slices benchmark's report: slices.json (every run), slices.md
// (medians, the targets, every run's main figures) and two plots.

// The targets.
const (
	slicesLatencyRatioMax = 1.2  // loaded p99 / idle p99 of the latency class, with slices
	slicesRateErrMax      = 0.05 // a rate-limited slice's rate vs its egressRate
	slicesThroughputMin   = 0.97 // node goodput with slices / without
)

// LoadSlicesReport reads dir's slices.json.
func LoadSlicesReport(dir string) (*SlicesReport, error) {
	b, err := os.ReadFile(filepath.Join(dir, "slices.json"))
	if err != nil {
		return nil, err
	}
	var r SlicesReport
	return &r, json.Unmarshal(b, &r)
}

// Write writes slices.json, slices.md and the plots into dir.
func (r *SlicesReport) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	files := map[string]string{
		"slices.json":        string(j) + "\n",
		"slices.md":          r.Markdown(),
		"slices-latency.svg": r.latencyPlot(),
		"slices-rates.svg":   r.ratesPlot(),
		"slices-goodput.svg": r.goodputPlot(),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (r *SlicesReport) point(n int, mode string) (SlicesPoint, bool) {
	for _, p := range r.Points {
		if p.Services == n && p.Mode == mode && len(p.Runs) > 0 {
			return p, true
		}
	}
	return SlicesPoint{}, false
}

// measured: some run was.
func (r *SlicesReport) measured() bool {
	return slices.ContainsFunc(r.Points, func(p SlicesPoint) bool { return len(p.Runs) > 0 })
}

// sizes are the numbers of Services some run was measured at.
func (r *SlicesReport) sizes() []int {
	var out []int
	for _, p := range r.Points {
		if len(p.Runs) > 0 && !slices.Contains(out, p.Services) {
			out = append(out, p.Services)
		}
	}
	slices.Sort(out)
	return out
}

// runsOf is one figure of every run of a point.
func runsOf(p SlicesPoint, f func(SlicesRun) float64) []float64 {
	out := make([]float64, len(p.Runs))
	for i, run := range p.Runs {
		out[i] = f(run)
	}
	return out
}

// latencyFig is one latency figure of a result.
type latencyFig struct {
	name string
	get  func(native.Result) float64
}

var latencyFigs = []latencyFig{
	{"p50", func(r native.Result) float64 { return r.P50 }},
	{"p99", func(r native.Result) float64 { return r.P99 }},
	{"p99.9", func(r native.Result) float64 { return r.P999 }},
	{"max", func(r native.Result) float64 { return r.Max }},
	{"stddev", func(r native.Result) float64 { return r.Stddev }},
}

func idleOf(f func(native.Result) float64) func(SlicesRun) float64 {
	return func(r SlicesRun) float64 { return f(r.Idle) }
}

func loadedOf(f func(native.Result) float64) func(SlicesRun) float64 {
	return func(r SlicesRun) float64 { return f(r.Loaded) }
}

func resP99(r native.Result) float64 { return r.P99 }

// spreadF is "median [min–max]" of xs, formatted with format.
func spreadF(xs []float64, format string) string {
	if len(xs) == 0 {
		return "–"
	}
	if len(xs) == 1 {
		return fmt.Sprintf(format, xs[0])
	}
	return fmt.Sprintf(format+" ["+format+"–"+format+"]", med(xs), slices.Min(xs), slices.Max(xs))
}

// p99Ratio is a point's median loaded p99 over its median idle p99.
func p99Ratio(p SlicesPoint) float64 {
	i := med(runsOf(p, idleOf(resP99)))
	if i == 0 {
		return math.NaN()
	}
	return med(runsOf(p, loadedOf(resP99))) / i
}

// bulkFig is one bulk pod's figure in a run (NaN: not measured).
func bulkFig(pod string, f func(SliceBulk) float64) func(SlicesRun) float64 {
	return func(r SlicesRun) float64 {
		for _, b := range r.Bulk {
			if b.Pod == pod {
				return f(b)
			}
		}
		return math.NaN()
	}
}

func shapedOf(b SliceBulk) float64  { return b.ShapedMbps }
func goodputOf(b SliceBulk) float64 { return b.GoodputMbps }

func nodeGoodputOf(r SlicesRun) float64 { return r.GoodputMbps }

type slicesTarget struct{ what, measured, verdict string }

func passMiss(ok, missing bool) string {
	switch {
	case missing:
		return "not measured"
	case ok:
		return "**PASS**"
	}
	return "**MISS**"
}

// targets evaluates the three targets at every number of
// Services, on the runs' medians.
func (r *SlicesReport) targets() []slicesTarget {
	var out []slicesTarget
	sizes := r.sizes()
	// 1. The latency class's p99, loaded vs idle.
	{
		var parts []string
		ok, missing := true, false
		for _, n := range sizes {
			p, has := r.point(n, SlicesOn)
			if !has {
				missing = true
				continue
			}
			x := p99Ratio(p)
			ok = ok && x <= slicesLatencyRatioMax
			s := fmt.Sprintf("%s: %.2f× (idle %.1f µs, loaded %.1f µs)", servicesLabel(n), x, med(runsOf(p, idleOf(resP99))), med(runsOf(p, loadedOf(resP99))))
			var without []string
			for _, m := range []string{SlicesOff, SlicesKubeProxy} {
				if q, has := r.point(n, m); has {
					without = append(without, fmt.Sprintf("%s %.2f× (%.1f → %.1f µs)", m, p99Ratio(q), med(runsOf(q, idleOf(resP99))), med(runsOf(q, loadedOf(resP99)))))
				}
			}
			if len(without) > 0 {
				s += "; without slices: " + strings.Join(without, ", ")
			}
			if q, has := r.point(n, SlicesHTBRef); has {
				s += fmt.Sprintf("; the same classes made with tc (%s): %.2f× (%.1f → %.1f µs)", SlicesHTBRef, p99Ratio(q), med(runsOf(q, idleOf(resP99))), med(runsOf(q, loadedOf(resP99))))
			}
			parts = append(parts, s)
		}
		out = append(out, slicesTarget{fmt.Sprintf("latency-class p99 loaded ≤ %.1f× its idle p99 (uplink saturated by the bulk slices)", slicesLatencyRatioMax),
			strings.Join(parts, "<br>"), passMiss(ok && len(parts) > 0, missing || len(parts) == 0)})
	}
	// 2. The rate-limited slices' rates.
	{
		var parts []string
		ok, missing := true, false
		for _, n := range sizes {
			p, has := r.point(n, SlicesOn)
			if !has {
				missing = true
				continue
			}
			for _, bp := range r.Bulk {
				if bp.Rate == 0 {
					continue
				}
				want := float64(bp.Rate) / 1e6
				got := med(runsOf(p, bulkFig(bp.Pod, shapedOf)))
				gp := med(runsOf(p, bulkFig(bp.Pod, goodputOf)))
				e := got/want - 1
				ok = ok && math.Abs(e) <= slicesRateErrMax
				parts = append(parts, fmt.Sprintf("%s, %s: %.1f of %.0f Mbit/s (%+.1f%%; goodput %.1f, %+.1f%%)", servicesLabel(n), bp.Slice, got, want, e*100, gp, (gp/want-1)*100))
			}
		}
		out = append(out, slicesTarget{fmt.Sprintf("rate-limited slices within ±%.0f%% of their egressRate (the rate the uplink's shaper sent them at, headers included)", slicesRateErrMax*100),
			strings.Join(parts, "<br>"), passMiss(ok && len(parts) > 0, missing || len(parts) == 0)})
	}
	// 3. Node throughput, with slices vs without.
	{
		var parts []string
		ok, missing := true, false
		for _, n := range sizes {
			on, has1 := r.point(n, SlicesOn)
			off, has2 := r.point(n, SlicesOff)
			if !has1 || !has2 {
				missing = true
				continue
			}
			a, b := med(runsOf(on, nodeGoodputOf)), med(runsOf(off, nodeGoodputOf))
			x := a / b
			ok = ok && x >= slicesThroughputMin
			parts = append(parts, fmt.Sprintf("%s: %.1f vs %.1f Mbit/s (%+.1f%%)", servicesLabel(n), a, b, (x-1)*100))
		}
		out = append(out, slicesTarget{fmt.Sprintf("node goodput with slices ≥ %.0f%% of slices off", slicesThroughputMin*100),
			strings.Join(parts, "<br>"), passMiss(ok && len(parts) > 0, missing || len(parts) == 0)})
	}
	return out
}

// tailNote says, where the reference was measured, whether the latency
// class's tail under load is netcube's or the kernel HTB's: the same
// classes made with tc show it too (within a quarter), or not.
func (r *SlicesReport) tailNote() string {
	var same, differ, below []string
	for _, n := range r.sizes() {
		on, ok1 := r.point(n, SlicesOn)
		ref, ok2 := r.point(n, SlicesHTBRef)
		if !ok1 || !ok2 {
			continue
		}
		a, b := med(runsOf(on, loadedOf(resP99))), med(runsOf(ref, loadedOf(resP99)))
		s := fmt.Sprintf("%s: %.1f µs with slices, %.1f µs with the tc-made classes", servicesLabel(n), a, b)
		switch {
		case a < 0.75*b:
			below = append(below, s)
		case a <= 1.25*b:
			same = append(same, s)
		default:
			differ = append(differ, s)
		}
	}
	switch {
	case len(same) > 0 && len(differ) == 0:
		note := "The latency class's loaded p99 is within a quarter of that of the same HTB classes made with tc and classified by u32 filters, without netcube (" + strings.Join(same, "; ") +
			"): what separates it from idle is the kernel's HTB on this sandbox, not netcube's classification. Most likely the veths: the CPU that dequeues a packet from the uplink's qdisc also carries it through the other node's stack, so the latency pair's CPU, whenever it runs the qdisc, also does receive work for bulk packets."
		var fifo []string
		for _, n := range r.sizes() {
			if p, ok := r.point(n, SlicesOff); ok {
				fifo = append(fifo, fmt.Sprintf("%.1f ms at %s", med(runsOf(p, loadedOf(resP99)))/1000, servicesLabel(n)))
			}
		}
		if len(fifo) > 0 {
			note += " Without classes the latency packets wait behind the uplink's FIFO: a loaded p99 of " + strings.Join(fifo, ", ") + "."
		}
		return note
	case len(differ) == 0 && len(below) > 0:
		return "The latency class's loaded p99 is below that of the same HTB classes made with tc in one HTB (" + strings.Join(below, "; ") +
			"): its own transmit queue keeps it out of the HTB, and keeps its CPU from dequeuing bulk packets from the HTB and carrying them through the other node's stack."
	case len(differ) > 0:
		return "The latency class's loaded p99 is above that of the same HTB classes made with tc without netcube (" + strings.Join(append(differ, same...), "; ") + "): netcube adds to the tail."
	}
	return ""
}

// shaperNote says when the one-class shaper (slices-off) sent less than
// the uplink's rate where netcube's classes sent it: the node-goodput
// target compares against what it sent.
func (r *SlicesReport) shaperNote() string {
	var parts []string
	for _, n := range r.sizes() {
		on, ok1 := r.point(n, SlicesOn)
		off, ok2 := r.point(n, SlicesOff)
		if !ok1 || !ok2 {
			continue
		}
		root := func(r SlicesRun) float64 { return r.RootMbps }
		a, b := med(runsOf(on, root)), med(runsOf(off, root))
		if b > 0 && b < 0.98*a {
			parts = append(parts, fmt.Sprintf("%s: %.1f vs %.1f Mbit/s", servicesLabel(n), b, a))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("Without classes, the one-class shaper's HTB root sent less than netcube's root with slices (%s, the uplink's rate %s, as HTB counts): one drop-tail FIFO keeps the uplink less busy than the classes do. The node-goodput target compares against what it sent.",
		strings.Join(parts, "; "), mbit(r.UplinkRate))
}

// latencyQueueNote says how much the latency class sent by its own
// queue, outside the HTB's rate, beside the bulk's node goodput.
func (r *SlicesReport) latencyQueueNote() string {
	var parts []string
	for _, n := range r.sizes() {
		if on, ok := r.point(n, SlicesOn); ok {
			if q := med(runsOf(on, func(r SlicesRun) float64 { return r.LatencyQueueMbps })); q > 0 {
				parts = append(parts, fmt.Sprintf("%s: %.1f Mbit/s", servicesLabel(n), q))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("With slices, the latency class left by its own queue, outside the HTB and its %s (%s, the latency pair's small packets): the uplink carried that much more than the HTB's rate. The node-goodput target counts the bulk pods only; on a NIC of the uplink's rate the latency class's traffic would come out of their share.",
		mbit(r.UplinkRate), strings.Join(parts, "; "))
}

func servicesLabel(n int) string {
	if n == 1 {
		return "1 Service"
	}
	return fmt.Sprintf("%s Services", thousands(n))
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// rateFlag is a rate as a quantity flag ("1G").
func rateFlag(bits uint64) string {
	switch {
	case bits%1_000_000_000 == 0:
		return fmt.Sprintf("%dG", bits/1_000_000_000)
	case bits%1_000_000 == 0:
		return fmt.Sprintf("%dM", bits/1_000_000)
	}
	return fmt.Sprint(bits)
}

func mbit(bits uint64) string {
	if bits%1_000_000_000 == 0 {
		return fmt.Sprintf("%d Gbit/s", bits/1_000_000_000)
	}
	return fmt.Sprintf("%g Mbit/s", float64(bits)/1e6)
}

// Markdown renders slices.md.
func (r *SlicesReport) Markdown() string {
	var b strings.Builder
	m := r.Machine
	b.WriteString("# netcube: network slices, the latency class under a saturated uplink\n\n")
	fmt.Fprintf(&b, "Measured %s, netcube %s, on %s (%s, %s CPUs, kernel %s); kube-proxy %s, %s, %s. ",
		r.MeasuredAt.Format("2006-01-02 15:04 UTC"), commitName(r.Commit), m["host"], m["cpu"], m["cpus"], m["kernel"], m["kube-proxy"], m["iptables"], m["iperf3"])
	runs := "runs"
	if r.Runs == 1 {
		runs = "run"
	}
	fmt.Fprintf(&b, "%d %s; each latency figure is one %gs request/response run, medians of the runs [min–max].\n\n", r.Runs, runs, r.DurationS)
	fmt.Fprintf(&b, "Reproduce: `make bench-slices` (`%s`).\n\n", r.Command)

	b.WriteString("**What the sandbox is.** One machine with 2 CPUs: every node and pod is a network namespace, every link a veth. ")
	fmt.Fprintf(&b, "A veth sends at once and never queues, so the agents run with `--uplink-rate %s` (%s): netcube's HTB root on the node uplink (the node's veth to the underlay) is that rate, and the queue forms there. ", rateFlag(r.UplinkRate), mbit(r.UplinkRate))
	b.WriteString("The modes without slices put an HTB with one class at the same rate on the same uplink (made like netcube's classes: same burst, same leaf FIFO, `txqueuelen` 1000 packets), ")
	b.WriteString("so they model a NIC of that rate with its one FIFO; the modes differ only in the classes. ")
	b.WriteString("All of it shares the machine's two CPUs: the latency client and server are pinned to CPU 1, every iperf3 client and server to CPU 0, the agents, kube-proxy and the API server are not pinned. ")
	b.WriteString("Absolute latencies are those of namespaces on one host (no wire, no NIC); what the report compares is how they change when the uplink is saturated.\n\n")

	b.WriteString("**Method.** Two nodes, native routing, four pods each. node1: n1p1 the latency client; ")
	var bulk []string
	for _, p := range r.Bulk {
		s := fmt.Sprintf("%s %s", p.Pod, p.Class)
		if p.Slice != "" {
			s = fmt.Sprintf("%s in slice %s (%s", p.Pod, p.Slice, p.Class)
			if p.Rate > 0 {
				s += ", egressRate " + mbit(p.Rate)
			}
			s += ")"
		} else {
			s += " (in no slice, no rate)"
		}
		bulk = append(bulk, s+" sending to "+p.Server)
	}
	b.WriteString(strings.Join(bulk, "; ") + ". node2: n2p1 the latency server (ncperf) behind a ClusterIP Service, n2p2–n2p4 the iperf3 servers. ")
	b.WriteString("The latency client runs request/response (ncperf rr: one TCP connection, 1 byte each way, back to back) to the Service's ClusterIP, so the Service's data plane is on the path; ")
	fmt.Fprintf(&b, "idle, then while the three bulk pods each run `iperf3 -P 4` to their server on node2, all across node1's uplink: iperf3 runs %d s after a first second it leaves out (slow start), the loaded latency is measured from 1 s into that to 1 s before its end. ", int(math.Ceil(r.DurationS))+2)
	b.WriteString("Each bulk pod's goodput is iperf3's (received); a rate-limited slice's rate is what its HTB class sent during the loaded latency run (the bytes the shaper counts: IP packet and Ethernet header, what egressRate limits; TCP goodput is at most 1448/1514 = 95.6% of it). ")
	b.WriteString("Node goodput is the three bulk pods' summed; \"uplink sent\" is node1's uplink's transmitted bytes during the loaded latency run (every packet, a GSO packet's headers counted once), \"its HTB root sent\" the root class's bytes meanwhile as HTB counts them (every segment's headers), what it holds to the uplink rate. ")
	b.WriteString("Under load without classes the latency client gets about a hundred answers a second, so a run has a few hundred samples and its p99.9 is close to its max. Modes, back to back in every run:\n\n")
	b.WriteString("- **slices**: NetworkSlices (manifest mode) put n1p1 and n2p1 in a latency slice and the rate-limited bulk pods in their throughput slices; netcube queues node1's uplink with its HTB classes. The sandbox's uplinks have two transmit queues (a NIC has several), so netcube puts an mq root on them: the HTB under the first queue, and the latency class in the second, a pfifo_fast that nothing else enters and nothing shapes (\"latency queue sent\" below: its traffic is not in the HTB root's rate; on a NIC of that rate it would come out of the bulk classes' share).\n")
	b.WriteString("- **slices-off**: no NetworkSlice and no annotation, so netcube installs no qdisc and does not classify; the bench's one-class HTB shapes node1's uplink.\n")
	b.WriteString("- **kube-proxy-iptables**: the real kube-proxy in iptables mode (nft backend), reading a real kube-apiserver and etcd that the bench runs on node1's loopback, serves the Service on node1; no slices, the same one-class HTB. ")
	b.WriteString("netcube's datapath cannot leave a Service to kube-proxy on a node where it runs (its tc programs masquerade a pod's packets to an address outside the cluster and send them to the FIB's next hop past netfilter, and hand the replies straight to the pod past conntrack, so kube-proxy's DNAT is never undone). ")
	b.WriteString("So for this mode node1's agent is stopped and its pins removed, as `bench compare` does: node1's kernel routes its pods (over the routes netcube installed), node2 keeps netcube. After the mode node1's agent starts again from empty pins.\n")
	if slices.Contains(r.Modes, SlicesHTBRef) {
		b.WriteString("- **htb-tc** (a reference): no NetworkSlice; the bench makes netcube's HTB classes itself on both uplinks, all in one HTB at the root, as netcube queued before the latency class had a queue of its own (with netlink: root at the uplink's rate, latency class at HTB priority 0, best effort and bulk at 1% and priorities 1 and 2, the two rate classes) and classifies with tc u32 filters on the source address. It shows what the latency class's own queue changes: with one HTB, whichever CPU enqueues a packet dequeues for everyone, so the latency pair's CPU, which enqueues most often, sends bulk packets on and carries them through the other node's stack.\n")
	}
	b.WriteString("\n")
	b.WriteString("\"N Services\" is the cluster's Services, the measured one included: N−1 IPv4 ClusterIP Services with one endpoint each, in netcube's manifests and (for kube-proxy) in the API server alike.\n\n")

	b.WriteString("## Targets\n\n| target | measured (medians) | result |\n|---|---|---|\n")
	for _, t := range r.targets() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.what, t.measured, t.verdict)
	}
	if note := r.tailNote(); note != "" {
		b.WriteString("\n" + note + "\n")
	}
	if note := r.shaperNote(); note != "" {
		b.WriteString("\n" + note + "\n")
	}
	if note := r.latencyQueueNote(); note != "" {
		b.WriteString("\n" + note + "\n")
	}
	b.WriteString("\n![p99 of the latency class, idle and loaded](slices-latency.svg)\n\n")

	for _, n := range r.sizes() {
		fmt.Fprintf(&b, "## %s\n\n", servicesLabel(n))
		b.WriteString("Latency class, request/response through the ClusterIP (µs):\n\n| mode | uplink | p50 | p99 | p99.9 | max | stddev | requests/s |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, mode := range r.Modes {
			p, ok := r.point(n, mode)
			if !ok {
				continue
			}
			for _, load := range []string{"idle", "loaded"} {
				sel := idleOf
				if load == "loaded" {
					sel = loadedOf
				}
				fmt.Fprintf(&b, "| %s | %s |", mode, load)
				for _, f := range latencyFigs {
					fmt.Fprintf(&b, " %s |", spreadF(runsOf(p, sel(f.get)), "%.1f"))
				}
				fmt.Fprintf(&b, " %s |\n", spreadF(runsOf(p, sel(func(r native.Result) float64 { return r.PerSec })), "%.0f"))
			}
		}
		var ratios []string
		for _, mode := range r.Modes {
			if p, ok := r.point(n, mode); ok {
				ratios = append(ratios, fmt.Sprintf("%s **%.2f×**", mode, p99Ratio(p)))
			}
		}
		b.WriteString("\nLoaded p99 / idle p99: " + strings.Join(ratios, "; ") + ".\n\n")

		rated := false
		for _, mode := range []string{SlicesOn, SlicesHTBRef} {
			p, ok := r.point(n, mode)
			if !ok {
				continue
			}
			if !rated {
				b.WriteString("Rate-limited slices (Mbit/s):\n\n| mode | slice | egressRate | sent by its HTB class | error | goodput (iperf3) | error |\n|---|---|---:|---:|---:|---:|---:|\n")
				rated = true
			}
			for _, bp := range r.Bulk {
				if bp.Rate == 0 {
					continue
				}
				want := float64(bp.Rate) / 1e6
				s, g := runsOf(p, bulkFig(bp.Pod, shapedOf)), runsOf(p, bulkFig(bp.Pod, goodputOf))
				fmt.Fprintf(&b, "| %s | %s (%s) | %.0f | %s | %+.1f%% | %s | %+.1f%% |\n", mode, bp.Slice, bp.Pod, want, spreadF(s, "%.1f"), (med(s)/want-1)*100, spreadF(g, "%.1f"), (med(g)/want-1)*100)
			}
		}
		if rated {
			b.WriteString("\n")
		}

		b.WriteString("Bulk goodput while loaded (Mbit/s):\n\n| mode |")
		for _, bp := range r.Bulk {
			name := bp.Pod + " (" + bp.Class
			if bp.Rate > 0 {
				name += ", " + mbit(bp.Rate)
			}
			fmt.Fprintf(&b, " %s) |", name)
		}
		b.WriteString(" node goodput | vs slices-off | uplink sent (all packets) | its HTB root sent | latency queue sent |\n|---|")
		b.WriteString(strings.Repeat("---:|", len(r.Bulk)+5) + "\n")
		off, hasOff := r.point(n, SlicesOff)
		for _, mode := range r.Modes {
			p, ok := r.point(n, mode)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s |", mode)
			for _, bp := range r.Bulk {
				fmt.Fprintf(&b, " %s |", spreadF(runsOf(p, bulkFig(bp.Pod, goodputOf)), "%.1f"))
			}
			vs := "–"
			if hasOff {
				vs = fmt.Sprintf("%+.1f%%", (med(runsOf(p, nodeGoodputOf))/med(runsOf(off, nodeGoodputOf))-1)*100)
			}
			lq := "–"
			if q := runsOf(p, func(r SlicesRun) float64 { return r.LatencyQueueMbps }); med(q) > 0 {
				lq = spreadF(q, "%.1f")
			}
			fmt.Fprintf(&b, " %s | %s | %s | %s | %s |\n", spreadF(runsOf(p, nodeGoodputOf), "%.1f"), vs, spreadF(runsOf(p, func(r SlicesRun) float64 { return r.UplinkMbps }), "%.1f"),
				spreadF(runsOf(p, func(r SlicesRun) float64 { return r.RootMbps }), "%.1f"), lq)
		}
		if p, ok := r.point(n, SlicesKubeProxy); ok {
			fmt.Fprintf(&b, "\nkube-proxy: start → the Service answers %s s (its rules restored at once; %s rules).\n",
				spreadF(runsOf(p, func(r SlicesRun) float64 { return r.KubeProxySyncS }), "%.1f"),
				spreadF(runsOf(p, func(r SlicesRun) float64 { return float64(r.KubeProxyRules) }), "%.0f"))
		}
		b.WriteString("\n")
	}
	b.WriteString("![rate-limited slices: egressRate, what their class sent, their goodput](slices-rates.svg)\n\n")
	b.WriteString("![node goodput by mode](slices-goodput.svg)\n\n")

	b.WriteString("## Every run\n\n| Services | mode | run | idle p99 | loaded p50 | loaded p99 | loaded p99.9 | loaded max | loaded stddev | node goodput (Mbit/s) |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		for i, run := range p.Runs {
			fmt.Fprintf(&b, "| %d | %s | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.1f | %.1f |\n", p.Services, p.Mode, i+1,
				run.Idle.P99, run.Loaded.P50, run.Loaded.P99, run.Loaded.P999, run.Loaded.Max, run.Loaded.Stddev, run.GoodputMbps)
		}
	}
	b.WriteString("\nslices.json has every run's figures in full (p90 and mean too; every bulk pod's goodput, retransmissions and rate class's; the uplink's; kube-proxy's sync).\n")
	return b.String()
}

// The plots: grouped bars, drawn here like plot.go's lines (plain SVG).

var slicesColors = []string{"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#666666"}

type barSeries struct {
	name string
	ys   []float64 // per group; NaN: none
}

// barPlot draws one bar per series in each group; the y axis is
// logarithmic when logY.
func barPlot(title, unit string, groups []string, ss []barSeries, logY bool) string {
	const h, left, right, top, bottom = 420, 70, 170, 40, 80
	w := left + right + max(560, 105*len(groups))
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, y := range s.ys {
			if !math.IsNaN(y) && y > 0 {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
	}
	if math.IsInf(hi, -1) {
		lo, hi = 1, 10
	}
	step := niceStep(hi * 1.05 / 5)
	ymin, ymax := 0.0, step*math.Ceil(hi*1.05/step)
	if logY {
		ymin, ymax = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
		if ymax == ymin {
			ymax *= 10
		}
	}
	py := func(y float64) float64 {
		f := (y - ymin) / (ymax - ymin)
		if logY {
			f = (math.Log10(y) - math.Log10(ymin)) / (math.Log10(ymax) - math.Log10(ymin))
		}
		return float64(h-bottom) - f*float64(h-top-bottom)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, escape(title))
	var ticks []float64
	if logY {
		for t := ymin; t <= ymax*1.0001; t *= 10 {
			ticks = append(ticks, t)
		}
	} else {
		for t := ymin; t <= ymax+step/2; t += step {
			ticks = append(ticks, t)
		}
	}
	for _, t := range ticks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left, y, w-right, y, left-6, y+4, tick(t))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n",
		left, h-bottom, w-right, h-bottom, left, top, left, h-bottom)
	fmt.Fprintf(&b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>`+"\n", (top+h-bottom)/2, (top+h-bottom)/2, escape(unit))
	gw := float64(w-left-right) / float64(max(1, len(groups)))
	bw := gw * 0.8 / float64(max(1, len(ss)))
	for g, name := range groups {
		x0 := float64(left) + float64(g)*gw + gw*0.1
		for k, s := range ss {
			if g >= len(s.ys) || math.IsNaN(s.ys[g]) || (logY && s.ys[g] <= 0) {
				continue
			}
			y := py(s.ys[g])
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %.1f %s</title></rect>`+"\n",
				x0+float64(k)*bw, y, bw*0.95, float64(h-bottom)-y, slicesColors[k%len(slicesColors)], escape(name), escape(s.name), s.ys[g], escape(unit))
		}
		for i, line := range strings.Split(name, "\n") {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="11">%s</text>`+"\n", x0+gw*0.4, h-bottom+16+13*i, escape(line))
		}
	}
	for k, s := range ss {
		ly := top + 10 + k*18
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			w-right+10, ly-5, slicesColors[k%len(slicesColors)], w-right+30, ly+4, escape(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// groupLabel names a mode at a number of Services, on lines short
// enough for a bar group.
func groupLabel(mode string, n int) string {
	return strings.Replace(mode, "kube-proxy-", "kube-proxy\n", 1) + "\n" + servicesLabel(n)
}

// niceStep rounds a tick step up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// latencyPlot: the latency class's p99, idle and loaded, per mode and
// number of Services (log scale: without slices, loaded is orders of
// magnitude above idle).
func (r *SlicesReport) latencyPlot() string {
	var groups []string
	idleS, loadedS := barSeries{name: "idle p99"}, barSeries{name: "loaded p99"}
	maxS := barSeries{name: "loaded p99.9"}
	for _, n := range r.sizes() {
		for _, mode := range r.Modes {
			p, ok := r.point(n, mode)
			if !ok {
				continue
			}
			groups = append(groups, groupLabel(mode, n))
			idleS.ys = append(idleS.ys, med(runsOf(p, idleOf(resP99))))
			loadedS.ys = append(loadedS.ys, med(runsOf(p, loadedOf(resP99))))
			maxS.ys = append(maxS.ys, med(runsOf(p, loadedOf(func(r native.Result) float64 { return r.P999 }))))
		}
	}
	return barPlot("Latency class, request/response through the ClusterIP: idle vs uplink saturated (medians)", "µs", groups, []barSeries{idleS, loadedS, maxS}, true)
}

// ratesPlot: each rate-limited slice's egressRate, what its class sent,
// and its goodput.
func (r *SlicesReport) ratesPlot() string {
	var groups []string
	cfg, sent, gp := barSeries{name: "egressRate"}, barSeries{name: "sent by its class"}, barSeries{name: "goodput (iperf3)"}
	for _, n := range r.sizes() {
		p, ok := r.point(n, SlicesOn)
		if !ok {
			continue
		}
		for _, bp := range r.Bulk {
			if bp.Rate == 0 {
				continue
			}
			groups = append(groups, bp.Slice+"\n"+servicesLabel(n))
			cfg.ys = append(cfg.ys, float64(bp.Rate)/1e6)
			sent.ys = append(sent.ys, med(runsOf(p, bulkFig(bp.Pod, shapedOf))))
			gp.ys = append(gp.ys, med(runsOf(p, bulkFig(bp.Pod, goodputOf))))
		}
	}
	return barPlot("Rate-limited slices under a saturated uplink (medians)", "Mbit/s", groups, []barSeries{cfg, sent, gp}, false)
}

// goodputPlot: each bulk pod's goodput and the node's, per mode.
func (r *SlicesReport) goodputPlot() string {
	var groups []string
	ss := make([]barSeries, len(r.Bulk)+1)
	for i, bp := range r.Bulk {
		ss[i].name = bp.Pod + " best effort"
		if bp.Slice != "" {
			ss[i].name = bp.Pod + " " + bp.Slice
		}
		if bp.Rate > 0 {
			ss[i].name += " " + rateFlag(bp.Rate)
		}
	}
	ss[len(r.Bulk)].name = "node total"
	for _, n := range r.sizes() {
		for _, mode := range r.Modes {
			p, ok := r.point(n, mode)
			if !ok {
				continue
			}
			groups = append(groups, groupLabel(mode, n))
			for i, bp := range r.Bulk {
				ss[i].ys = append(ss[i].ys, med(runsOf(p, bulkFig(bp.Pod, goodputOf))))
			}
			ss[len(r.Bulk)].ys = append(ss[len(r.Bulk)].ys, med(runsOf(p, nodeGoodputOf)))
		}
	}
	return barPlot(fmt.Sprintf("Bulk goodput across node1's uplink (%s, medians)", mbit(r.UplinkRate)), "Mbit/s", groups, ss, false)
}
