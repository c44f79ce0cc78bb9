package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// writeScaleReport writes <name>.json, <name>.md and the plots.
func writeScaleReport(cfg ScaleConfig, results []ScaleResult) error {
	at := time.Now()
	name := cmp.Or(cfg.Name, "scale")
	if err := os.MkdirAll(filepath.Join(cfg.OutDir, "plots"), 0o755); err != nil {
		return err
	}
	j, _ := json.MarshalIndent(map[string]any{"commit": Commit(), "measured_at": at.UTC(), "results": results}, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.OutDir, name+".json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	for file, svg := range scalePlots(cfg, results) {
		if err := os.WriteFile(filepath.Join(cfg.OutDir, "plots", name+"-"+file), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(cfg.OutDir, name+".md"), []byte(ScaleMarkdown(cfg, results, at)), 0o644)
}

// scalePlots draws latency and the API server's cost against N, a line
// per variant when there are several.
func scalePlots(cfg ScaleConfig, results []ScaleResult) map[string]string {
	ns := cfg.Agents
	at := func(v string, n int, f func(ScaleResult) float64) float64 {
		for _, r := range results {
			if r.Agents == n && r.Variant == v && r.Error == "" {
				return f(r)
			}
		}
		return math.NaN()
	}
	var lat, cost []series
	for _, v := range cfg.Variants {
		label := func(what string) string {
			if len(cfg.Variants) > 1 {
				return v + ": " + what
			}
			return what
		}
		p50, p99 := series{name: label("latency p50 (ms)"), dashed: true}, series{name: label("latency p99 (ms)")}
		cpu, watch := series{name: label("API CPU ms per agent start")}, series{name: label("watch bytes per agent per endpoint change"), dashed: true}
		for _, n := range ns {
			p50.ys = append(p50.ys, at(v, n, func(r ScaleResult) float64 { return r.LatencyP50MS }))
			p99.ys = append(p99.ys, at(v, n, func(r ScaleResult) float64 { return r.LatencyP99MS }))
			cpu.ys = append(cpu.ys, at(v, n, func(r ScaleResult) float64 { return r.APIServerCPUPerStartS * 1e3 }))
			watch.ys = append(watch.ys, at(v, n, func(r ScaleResult) float64 { return r.WatchBytesPerEndpointChange }))
		}
		lat, cost = append(lat, p50, p99), append(cost, cpu, watch)
	}
	return map[string]string{
		"latency.svg":   svgPlot("Network programming latency against hollow agents", "agents", ns, lat),
		"apiserver.svg": svgPlot("What the API server pays per agent", "agents", ns, cost),
	}
}

// spreadOver says which nodes the pods are on.
func spreadOver(cfg ScaleConfig) string {
	if cfg.ClusterPerN {
		return "the N nodes (each N has a cluster of its own: API server, etcd, the objects)"
	}
	return "the largest N's nodes"
}

// ScaleMarkdown renders the report: the points measured in the tables,
// the failed ones listed apart.
func ScaleMarkdown(cfg ScaleConfig, all []ScaleResult, at time.Time) string {
	var results, failed []ScaleResult
	for _, r := range all {
		if r.Error != "" {
			failed = append(failed, r)
		} else {
			results = append(results, r)
		}
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# netcube past one machine: hollow agents against one control plane\n\n")
	fmt.Fprintf(&b, "Measured %s (netcube commit %s) on %s (%d CPUs, kernel %s) against a real kube-apiserver + etcd (v1.36.3, built from the Go module proxy) on the same machine.\n\n",
		at.UTC().Format("2006-01-02 15:04 UTC"), Commit(), host, runtime.NumCPU(), kernelRelease())
	fmt.Fprintf(&b, "**Method.** N hollow agents: the real `netcube-agent` with `--datapath=memory` (its maps in memory; the same sources, reconcilers, ownership and policy compiler; no BPF, nothing on the host), each with its own Node object, all against one API server. The agents run at nice %d: in a cluster the control plane has machines of its own, here it shares the two CPUs with every agent, and at equal priority 100 agents starved it (TLS handshakes and lists timed out, and every agent retried). The cluster: %d Services with %d endpoints each (ClusterIP, one port; stored straight into etcd, `kubeenv.StoreDirect`), %d running pods spread over %s, %d NetworkPolicies (each selecting a tenth of the pods, allowing another tenth on one port). For each N, every agent is started at once (**cold start**: until the last is ready); then, for %s, **%g endpoint changes per second** (a random Service's EndpointSlice rewritten through the API, its `endpoints.kubernetes.io/last-change-trigger-time` set to the moment of the write, as the EndpointSlice controller sets it to the pod's change), **%g pod status changes per second** (a random pod's Ready condition flipped through its status, as the kubelet writes it: with the default pod source every agent is sent each, since policy needs every pod's labels and address, and with `--pod-source=nodepods` only the pod's own node's agent; these pods are minimal, one container and no volumes, so a real pod's change weighs more) and a policy edit every %s.\n\n",
		agentNice, cfg.Services, cfg.Endpoints, cfg.Pods, spreadOver(cfg), cfg.Policies, cfg.Duration, cfg.Rate, cfg.PodRate, cfg.PolicyEvery)
	b.WriteString("- **cold start**: every agent started at once, until the last is ready, and the API server's CPU seconds meanwhile per agent; then **agents restarted**: every agent stopped and started again at once (a DaemonSet's restart), against the state the first ones left.\n")
	b.WriteString("- **network programming latency**: each agent's `netcube_network_programming_duration_seconds` (trigger time → that node's maps written, as kube-proxy's `kubeproxy_network_programming_duration_seconds`; factor-1.5 buckets from 1 ms), the agents' histograms merged: every change counts once per agent. p50/p99 interpolated within a bucket; *max* is the upper bound of the highest bucket reached. The trigger time is the test client's clock, the same machine's.\n")
	b.WriteString("- **policy sync**: each agent's `netcube_policy_sync_seconds` over the stream (compiling what the pod changes and policy edits touched, and writing the policy maps; a sync may batch several), merged.\n")
	b.WriteString("- **API server**: its CPU seconds over the cold start (per agent) and over the stream; its peak RSS sampled every 250 ms over the N (from a freshly started server); **watch bytes per agent per change**: the growth of its `apiserver_watch_events_sizes_sum` for the resource (every watcher) over the stream, divided by agents × that resource's changes (a pod change: its Pod's events and its node's NodePods', if it were written there).\n")
	b.WriteString("- **agent**: peak RSS (VmHWM) averaged over the agents, and that over the Services (it includes the Go runtime and the binary's pages); CPU per change: the stream's agent CPU, per agent, per change of any kind.\n\n")
	variants := len(cfg.Variants) > 1
	first := func(r ScaleResult) string { // the row's first cells
		if variants {
			return fmt.Sprintf("| %d | %s ", r.Agents, r.Variant)
		}
		return fmt.Sprintf("| %d ", r.Agents)
	}
	head := func(cells string) string {
		if variants {
			return "| agents | variant " + cells
		}
		return "| agents " + cells
	}
	align := func(n int) string {
		if variants {
			n++
		}
		return strings.Repeat("|---:", n) + "|\n"
	}
	if variants {
		b.WriteString("**Variants**, each measured at every N in an order that turns with N: how the agents ask the API server for their state. ")
		for _, v := range cfg.Variants {
			fmt.Fprintf(&b, "`%s`: %s. ", v, scaleVariants[v].doc)
		}
		b.WriteString("Every point starts from a freshly started API server, so that none inherits the heap another point's agents grew.\n\n")
	}
	b.WriteString("**Cold start, and latency over the stream.**\n\n")
	b.WriteString(head("| cold start: all ready / median (s) | API server CPU per agent start (s) | agents restarted: all ready (s) / API server CPU per agent (s) | API server peak RSS (MB) | agent peak RSS (MB) | agent KB per Service | changes: endpoint / pod / policy | latencies observed | programming latency p50 / p99 / max (ms) | policy syncs | policy sync p50 / p99 (ms) |\n"))
	b.WriteString(align(12))
	for _, r := range results {
		fmt.Fprintf(&b, "%s| %.1f / %.1f | %.3f | %.1f / %.3f | %.0f | %.0f | %.1f | %d / %d / %d | %d | %.1f / %.1f / ≤ %.0f | %d | %.2f / %.2f |\n",
			first(r), r.AllReadyS, r.MedianReadyS, r.APIServerCPUPerStartS, r.RestartedReadyS, r.APIServerCPUPerRestartS, r.APIServerPeakRSSMB, r.AgentRSSMB, r.AgentKBPerService,
			r.Changes, r.PodChanges, r.PolicyEdits, r.Observed, r.LatencyP50MS, r.LatencyP99MS, r.LatencyMaxMS,
			r.PolicySyncs, r.PolicySyncP50MS, r.PolicySyncP99MS)
	}
	b.WriteString("\n**What each change costs over the stream.**\n\n")
	b.WriteString(head("| API server CPU (s) | watch bytes per agent per endpoint change | … per pod change | … per policy edit | agent CPU per change (ms) |\n"))
	b.WriteString(align(6))
	for _, r := range results {
		fmt.Fprintf(&b, "%s| %.1f | %.0f | %.0f | %.0f | %.2f |\n", first(r), r.APIServerCPUS,
			r.WatchBytesPerEndpointChange, r.WatchBytesPerPodChange, r.WatchBytesPerPolicyEdit, r.AgentCPUPerChangeMS)
	}
	b.WriteString("\n**API server restart.** After the stream, the API server is stopped for a few seconds and started again under the N agents (every watch ends; a resource version older than the new server's watch cache means a relist). From the stop: until the new server is ready (`/readyz`), and until every agent has programmed a change written once it was; the new server's CPU seconds (its start included) and peak RSS until then, and the LIST requests it served (`apiserver_request_total`, since it started).\n\n")
	b.WriteString(head("| API server down (s) | stop → API server ready (s) | stop → every agent current (s) | API server CPU (s) | API server peak RSS (MB) | LIST requests | WATCH requests |\n"))
	b.WriteString(align(8))
	for _, r := range results {
		fmt.Fprintf(&b, "%s| %.0f | %.1f | %.1f | %.1f | %.0f | %d | %d |\n", first(r), r.RestartDownS, r.RestartReadyS, r.RestartCurrentS, r.RestartAPICPUS, r.RestartAPIPeakRSS, r.RestartListsServed, r.RestartWatchesServed)
	}
	if len(failed) > 0 {
		b.WriteString("\n**Failed points** (not in the tables or plots; their partial figures are in the JSON):\n\n")
		for _, r := range failed {
			msg, _, _ := strings.Cut(r.Error, "\n")
			fmt.Fprintf(&b, "- %d agents, %s: %s\n", r.Agents, r.Variant, msg)
		}
	}
	name := cmp.Or(cfg.Name, "scale")
	fmt.Fprintf(&b, "\n![latency against N](plots/%s-latency.svg)\n\n![API server cost per agent against N](plots/%s-apiserver.svg)\n\n", name, name)
	b.WriteString("Target (issue 34): network programming latency p99 < 1 s at N = 100 (the SLO is 30 s).\n\n")
	var agents []string
	for _, n := range cfg.Agents {
		agents = append(agents, fmt.Sprint(n))
	}
	extra := ""
	if variants {
		extra = " --variants " + strings.Join(cfg.Variants, ",")
	}
	if cfg.ClusterPerN {
		extra += " --cluster-per-n"
	}
	if cfg.Name != "" && cfg.Name != "scale" {
		extra += " --name " + cfg.Name
	}
	fmt.Fprintf(&b, "Reproduce: `bin/netcube-lab bench scale --agents %s --services %d --endpoints %d --pods %d --policies %d --rate %g --pod-rate %g --duration %s --policy-every %s%s`",
		strings.Join(agents, ","), cfg.Services, cfg.Endpoints, cfg.Pods, cfg.Policies, cfg.Rate, cfg.PodRate, cfg.Duration, cfg.PolicyEvery, extra)
	if !variants {
		b.WriteString(" (`make bench-scale`)")
	}
	b.WriteString(".\n")
	return b.String()
}
