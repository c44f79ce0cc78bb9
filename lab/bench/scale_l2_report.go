package bench

// bench scale-l2's report: scale-l2.json, scale-l2.md and
// plots/scale-l2.svg (the API server's requests per second and CPU, by
// mode).

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/netcube/netcube/pkg/l2announce"
)

// ScaleL2Report is scale-l2.json.
type ScaleL2Report struct {
	RunHeader
	Services         int             `json:"services"`
	HeartbeatEvery   float64         `json:"heartbeat_interval_seconds"`
	DeadAfter        float64         `json:"dead_after_seconds"`
	LeaseRenewEveryS float64         `json:"lease_renew_seconds"`
	Results          []ScaleL2Result `json:"results"`
}

func writeScaleL2Report(cfg ScaleL2Config, h RunHeader, results []ScaleL2Result) error {
	rep := ScaleL2Report{RunHeader: h, Services: cfg.Services, HeartbeatEvery: cfg.Interval.Seconds(),
		DeadAfter: (time.Duration(l2announce.DefaultMisses) * cfg.Interval).Seconds(), LeaseRenewEveryS: cfg.LeaseRenew.Seconds(), Results: results}
	name := cmp.Or(cfg.Name, "scale-l2")
	return writeReportFiles(cfg.OutDir, name, rep, ScaleL2Markdown(rep, name), scaleL2Plot(rep))
}

// l2Means averages each mode's points at n (the rounds), the failed left out.
func l2Means(rs []ScaleL2Result, n int, mode string) (ScaleL2Result, int) {
	var out ScaleL2Result
	out.Requests = map[string]float64{}
	k := 0
	for _, r := range rs {
		if r.Agents != n || r.Mode != mode || r.Error != "" {
			continue
		}
		k++
		out.WritesPerS += r.WritesPerS
		out.ReadsPerS += r.ReadsPerS
		out.APICores += r.APICores
		out.EtcdCores += r.EtcdCores
		out.AgentCores += r.AgentCores
		out.LeaseRenewals += r.LeaseRenewals
		for key, v := range r.Requests {
			out.Requests[key] += v
		}
	}
	if k > 0 {
		f := 1 / float64(k)
		out.WritesPerS, out.ReadsPerS, out.APICores, out.EtcdCores, out.AgentCores, out.LeaseRenewals =
			out.WritesPerS*f, out.ReadsPerS*f, out.APICores*f, out.EtcdCores*f, out.AgentCores*f, out.LeaseRenewals*f
		for key := range out.Requests {
			out.Requests[key] *= f
		}
	}
	return out, k
}

var l2Modes = []string{l2ModeAll, l2ModeElected, l2ModeLeases}

// ScaleL2Markdown renders the report.
func ScaleL2Markdown(rep ScaleL2Report, name string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# L2 announcer election at scale: what it costs the API server\n\n")
	make := ""
	if name == "scale-l2" {
		make = " (`make bench-scale-l2`)"
	}
	p("Measured at commit `%s` on %s, %s. Reproduce: `%s`%s.\n\n", rep.Commit, rep.Machine, rep.MeasuredAt.Format(time.RFC3339), rep.Command, make)
	p("**Method.** One kube-apiserver + etcd; %d LoadBalancer Services (each one ingress IP in `status.loadBalancer.ingress`; ", rep.Services)
	p("every other one `externalTrafficPolicy: Local`, with ready endpoints on 3 nodes spread over the cluster, the others `Cluster` with endpoints on 2); ")
	p("N hollow agents (`--datapath=memory`: the real agent, its maps in memory; bench scale's), each with its Node, niced to 19 as in bench scale. Modes, by turns, each from a fresh start of the N agents:\n\n")
	p("- `all`: `--l2-announce=all`, no election: every eligible node answers for each address (every node for Cluster, those with an endpoint for Local).\n")
	p("- `elected`: the election (pkg/l2announce), run for real by each hollow agent: `--l2-heartbeat-addrs` gives it a loopback address of its own (127.1.x.y, its Node's InternalIP), ")
	p("and it sends a UDP heartbeat every %s to every other node's address (`--l2-heartbeat-interval`; dead after %d misses, %s) and elects each address's announcer by rendezvous hash; ", secs(rep.HeartbeatEvery), l2announce.DefaultMisses, secs(rep.DeadAfter))
	p("with no uplink it sends no gratuitous ARP but counts each takeover (`netcube_l2_takeovers_total`). The window starts once every agent counts all N alive and the addresses announced, summed over the agents, are exactly those with an eligible node (one announcer each).\n")
	p("- `all+leases`: the `all` agents still running, plus a replay of Cilium's election, one `coordination.k8s.io` Lease per Service (`cilium-l2announce-<ns>-<svc>` in kube-system), each renewed by its holder with one PUT every %s ", secs(rep.LeaseRenewEveryS))
	p("(Cilium's `l2announcements.leaseRetryPeriod` default, 2 s, with `leaseDuration` 15 s and `leaseRenewDeadline` 5 s; client-go's leader election renews a held Lease every RetryPeriod), by a pool of %d goroutines in the bench's process, spread evenly over the period.\n\n", leaseWorkers)
	p("Each window lasts %s: the API server's requests per second from `apiserver_request_total` deltas (every client: the agents, the API server's own loops, the replay), the CPU of kube-apiserver, etcd and each agent (from /proc), heartbeats per node per second (`netcube_l2_heartbeats_*`). ", secs(rep.DurationS))
	p("After the `elected` window one agent (the middle one) is killed with SIGKILL: the addresses it announced, the takeovers the others count, and from the kill until the first and the last alive agent counted it dead (`netcube_l2_alive_changed_timestamp_seconds`), until the last takeover (`netcube_l2_last_takeover_timestamp_seconds`), and until the bench, polling every agent, saw them all agree.\n\n")

	var ns []int
	for _, r := range rep.Results {
		if !slices.Contains(ns, r.Agents) {
			ns = append(ns, r.Agents)
		}
	}
	p("## Steady state, each point\n\n")
	p("| agents | mode | round | writes/s | GET+LIST/s | watches open | API server cores | etcd cores | agent cores (mean) | agent RSS MB | heartbeats sent / accepted per node per s | alive-set changes in window | announced / expected | all ready s |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Results {
		if r.Error != "" && r.WindowS == 0 {
			continue // failed before its window
		}
		hb, ann := "–", "–"
		if r.Mode == l2ModeElected {
			hb = fmt.Sprintf("%.1f / %.1f", r.HeartbeatsTx, r.HeartbeatsRx)
			ann = fmt.Sprintf("%d / %d", r.Announced, r.Expected)
		}
		mode := r.Mode
		if r.Error != "" {
			mode += " (failed: below)"
		}
		p("| %d | %s | %d | %.2f | %.2f | %.0f | %.3f | %.3f | %.4f | %.0f | %s | %d | %s | %.1f |\n", r.Agents, mode, r.Round, r.WritesPerS, r.ReadsPerS, r.WatchesOpen,
			r.APICores, r.EtcdCores, r.AgentCores, r.AgentRSSMB, hb, r.AliveChanges, ann, r.StartAllS)
	}
	p("\nEvents written in each window, by writer and reason, and the agents' config problems at its end:\n\n")
	for _, r := range rep.Results {
		if r.Error != "" {
			continue
		}
		var evs []string
		for _, k := range slices.Sorted(maps.Keys(r.Events)) {
			evs = append(evs, fmt.Sprintf("%s: %d", k, r.Events[k]))
		}
		if len(evs) == 0 {
			evs = []string{"none"}
		}
		p("- %d agents, %s, round %d: %s; agent config problems %d\n", r.Agents, r.Mode, r.Round, strings.Join(evs, ", "), r.Problems)
	}
	for _, n := range ns {
		p("\n## %d agents: API requests per second by verb and resource (mean of the rounds)\n\n", n)
		means := map[string]ScaleL2Result{}
		keys := map[string]float64{}
		var header []string
		for _, m := range l2Modes {
			if r, k := l2Means(rep.Results, n, m); k > 0 {
				means[m] = r
				header = append(header, m)
				for key, v := range r.Requests {
					keys[key] = max(keys[key], v)
				}
			}
		}
		p("| request | %s |\n|---|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
		for _, key := range sortedKeys(keys) {
			p("| %s |", key)
			for _, m := range header {
				p(" %.2f |", means[m].Requests[key])
			}
			p("\n")
		}
		p("| **writes** |")
		for _, m := range header {
			p(" **%.2f** |", means[m].WritesPerS)
		}
		p("\n| **API server cores** |")
		for _, m := range header {
			p(" **%.3f** |", means[m].APICores)
		}
		p("\n| agent cores (mean) |")
		for _, m := range header {
			p(" %.4f |", means[m].AgentCores)
		}
		p("\n")
		all, el, ls := means[l2ModeAll], means[l2ModeElected], means[l2ModeLeases]
		if _, ok := means[l2ModeElected]; ok {
			p("\nThe election against no election: %+.2f writes/s, %+.2f GET+LIST/s, %+.3f API server cores, %+.4f cores per agent.\n", el.WritesPerS-all.WritesPerS, el.ReadsPerS-all.ReadsPerS, el.APICores-all.APICores, el.AgentCores-all.AgentCores)
		}
		if _, ok := means[l2ModeLeases]; ok {
			p("\n**Against one Lease per Service:** the replay renewed %.0f Leases/s (%d Services / %s) and cost the API server %+.2f writes/s and %+.3f cores (etcd %+.3f) over the same agents without it; ", ls.LeaseRenewals, rep.Services, secs(rep.LeaseRenewEveryS), ls.WritesPerS-all.WritesPerS, ls.APICores-all.APICores, ls.EtcdCores-all.EtcdCores)
			p("netcube's election, %+.2f writes/s and %+.3f cores. ", el.WritesPerS-all.WritesPerS, el.APICores-all.APICores)
			cand := float64(n-1) * float64(rep.Services) / (rep.LeaseRenewEveryS * 1.6)
			p("Not replayed: in Cilium every node the policy selects runs an elector per Service, and each of the %d non-holders GETs each Lease every RetryPeriod with client-go's jitter (x1 to x2.2, mean 1.6 x %s): about %.0f GET/s more at %d nodes, growing with nodes x Services.\n", n-1, secs(rep.LeaseRenewEveryS), cand, n)
		}
	}
	p("\n## Kill: one agent stopped dead (elected)\n\n")
	p("| agents | round | killed | announced | moved (takeovers) | expected after | first agent saw it dead s | all saw it dead s | last takeover s | agreement seen s |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Results {
		if k := r.Kill; k != nil {
			p("| %d | %d | %s | %d | %d | %d | %.2f | %.2f | %.2f | %.2f%s |\n", r.Agents, r.Round, k.Node, k.Announced, k.Moved, k.Expected, k.FirstSawS, k.AllSawS, k.LastTakeS, k.AgreedS,
				map[bool]string{true: "", false: " (not agreed)"}[k.Agreed])
		}
	}
	var failed []string
	for _, r := range rep.Results {
		if r.Error != "" {
			failed = append(failed, fmt.Sprintf("- %d agents, %s, round %d: %s", r.Agents, r.Mode, r.Round, r.Error))
		}
	}
	if len(failed) > 0 {
		p("\n## Failed points\n\n%s\n", strings.Join(failed, "\n"))
	}
	p("\nPlot: [plots/%s.svg](plots/%s.svg).\n", name, name)
	return b.String()
}

func secs(s float64) string { return (time.Duration(s * float64(time.Second))).String() }

// scaleL2Plot draws, per mode at the largest N, the API server's writes
// and GET+LIST per second and its CPU (millicores), as bars.
func scaleL2Plot(rep ScaleL2Report) string {
	n := 0
	for _, r := range rep.Results {
		n = max(n, r.Agents)
	}
	type bar struct {
		label string
		v     float64
	}
	var groups [][]bar
	var titles []string
	for _, m := range l2Modes {
		r, k := l2Means(rep.Results, n, m)
		if k == 0 {
			continue
		}
		titles = append(titles, m)
		groups = append(groups, []bar{{"writes/s", r.WritesPerS}, {"GET+LIST/s", r.ReadsPerS}, {"API millicores", r.APICores * 1e3}})
	}
	const w, h, left, top, bottom, barW = 760, 400, 60, 50, 60, 40
	hi := 1.0
	for _, g := range groups {
		for _, b := range g {
			hi = math.Max(hi, b.v)
		}
	}
	hi *= 1.15
	colors := []string{"#d95f02", "#7570b3", "#1b9e77"}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left,
		escape(fmt.Sprintf("API server cost of L2 announcing, %d agents, %d LoadBalancer Services", n, rep.Services)))
	fmt.Fprintf(&s, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-20, h-bottom)
	py := func(v float64) float64 { return float64(h-bottom) - v/hi*float64(h-top-bottom) }
	gw := float64(w-left-20) / float64(max(1, len(groups)))
	for gi, g := range groups {
		x0 := float64(left) + float64(gi)*gw + (gw-float64(len(g)*barW))/2
		for bi, b := range g {
			x := x0 + float64(bi*barW)
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%d" height="%.1f" fill="%s"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
				x, py(b.v), barW-6, float64(h-bottom)-py(b.v), colors[bi], x+float64(barW-6)/2, py(b.v)-4, tick(b.v))
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", float64(left)+float64(gi)*gw+gw/2, h-bottom+20, escape(titles[gi]))
	}
	if len(groups) > 0 {
		for bi, b := range groups[0] {
			fmt.Fprintf(&s, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", left+bi*150, h-22, colors[bi], left+bi*150+16, h-12, escape(b.label))
		}
	}
	s.WriteString("</svg>\n")
	return s.String()
}
