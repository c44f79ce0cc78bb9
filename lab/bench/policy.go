package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/lab/bench/native"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// PolicyConfig configures `netcube-lab bench policy`.
type PolicyConfig struct {
	Runs     int
	Duration time.Duration
	BinDir   string
	OutDir   string // policy.{json,md}; "": none
	Log      io.Writer
	// ClusterPolicies, when set, adds the mode "cluster": the policies
	// and, selecting the client and the servers, this many Admin-tier and
	// as many Baseline-tier ClusterNetworkPolicies (benchClusterPolicies),
	// in place of the quiet mode; the report is then cluster-policy.*.
	ClusterPolicies int
	// KubeNetworkPolicies, when set, is the directory holding
	// sigs.k8s.io/kube-network-policies (hack/build-kube-network-policies.sh),
	// run on node1 in the same session for NetworkPolicy (knp.go).
	KubeNetworkPolicies string
}

// PolicyPoint is one path's figures with and without the policies.
type PolicyPoint struct {
	Family    string        `json:"family"`
	Placement string        `json:"placement"` // same-node, cross-node
	None      PolicyFigures `json:"no_policy"`
	Policies  PolicyFigures `json:"policies"`
	// Cluster: the policies and the ClusterNetworkPolicies (mode cluster).
	Cluster *PolicyFigures             `json:"policies_and_cluster_policies,omitempty"`
	Raw     map[string][]native.Result `json:"raw,omitempty"`
}

// PolicyFigures are the medians of the runs.
type PolicyFigures struct {
	ConnPerSec float64 `json:"conn_per_sec"`
	RRP99      float64 `json:"rr_p99_us"`
	// BPFNsPerConn and BPFRunsPerConn: netcube's programs' time and runs
	// per new connection (bpf_stats, every node's programs), in a 1 s
	// connection run of their own after the measured ones.
	BPFNsPerConn   float64 `json:"bpf_ns_per_conn"`
	BPFRunsPerConn float64 `json:"bpf_runs_per_conn"`
	// BPFNsPerConnQuiet: the same with the datapath's policy verdict
	// events off (the agent's --monitor-policy=false), policies only: how
	// much of the policies' time is the events a user can switch off.
	BPFNsPerConnQuiet float64 `json:"bpf_ns_per_conn_no_verdict_events,omitempty"`
	// ConnPerSecQuiet: new connections/s with the verdict events off
	// (policies only; measured back to back with the other modes).
	ConnPerSecQuiet float64 `json:"conn_per_sec_no_verdict_events,omitempty"`
}

// PolicyReport is what `netcube-lab bench policy` writes.
type PolicyReport struct {
	Commit     string    `json:"commit"`
	MeasuredAt time.Time `json:"measured_at"`
	Machine    string    `json:"machine"`
	Command    string    `json:"command"`
	Runs       int       `json:"runs"`
	DurationS  float64   `json:"duration_s"`
	Scale      string    `json:"scale"`
	Tables     string    `json:"tables"`
	// ClusterScale and ClusterTables: the ClusterNetworkPolicies of mode
	// cluster and node1's tables with them.
	ClusterScale  string        `json:"cluster_scale,omitempty"`
	ClusterTables string        `json:"cluster_tables,omitempty"`
	Points        []PolicyPoint `json:"points"`
	// KubeNetworkPolicies: what sigs.k8s.io/kube-network-policies did on
	// node1 in the same session (knp.go).
	KubeNetworkPolicies *KNPAttempt `json:"kube_network_policies,omitempty"`
}

// RunPolicy measures the per-packet cost of NetworkPolicy: new connections
// per second and request/response p99 between sandbox pods (same node and
// across nodes, IPv4 and IPv6), with no policy and with 1,000 policies over
// 200 more pods in 10 namespaces, runs alternating. With the policies the
// client is egress-isolated and the servers ingress-isolated, allowed by a
// rule each: every new connection takes the full lookup on both ends. The
// tables are compiled as the agent compiles them and written into each
// node's pinned maps (the manifest-mode agent has no policy source, so
// nothing else writes them).
func RunPolicy(cfg PolicyConfig) (*PolicyReport, error) {
	tmp, err := os.MkdirTemp("", "netcube-policy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ncperf, err := native.Build(tmp)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	rep := &PolicyReport{Commit: Commit(), MeasuredAt: time.Now().UTC(), Runs: cfg.Runs, DurationS: cfg.Duration.Seconds(),
		Machine: fmt.Sprintf("%s (kernel %s, %d CPUs)", host, kernelRelease(), runtime.NumCPU()),
		Command: fmt.Sprintf("netcube-lab bench policy --runs %d --duration %s", cfg.Runs, cfg.Duration),
		Scale:   "1,000 NetworkPolicies over 200 pods in 10 namespaces, plus the benchmark's own pods and 2 policies"}
	name := "pol1"
	if cfg.ClusterPolicies > 0 {
		rep.Command += fmt.Sprintf(" --cluster-policies %d", cfg.ClusterPolicies)
		rep.ClusterScale = fmt.Sprintf("%d Admin-tier and %d Baseline-tier ClusterNetworkPolicies, each selecting the client and the servers", cfg.ClusterPolicies, cfg.ClusterPolicies)
		name = "cnpbench"
	}
	if cfg.KubeNetworkPolicies != "" {
		rep.Command += " --kube-network-policies"
	}
	fmt.Fprintln(cfg.Log, "sandbox up (native routing)")
	sb, err := upPeer(PodnetConfig{BinDir: cfg.BinDir}, PeerNetcubeNative, name)
	if err != nil {
		return nil, err
	}
	defer sandbox.Down(sb.Config.Name, io.Discard) //nolint:errcheck
	if err := preparePeer(sb, ncperf); err != nil {
		return nil, err
	}
	client := sb.Topology.Nodes[0].Pods[0]
	targets := []struct {
		placement string
		pod       sandbox.Pod
	}{{"same-node", sb.Topology.Nodes[0].Pods[1]}, {"cross-node", sb.Topology.Nodes[1].Pods[0]}}

	// Each node's maps, and the tables with and without the policies.
	var nodes []nodeTables
	cl := benchCluster(sb)
	var withCNPs *policy.Cluster
	if cfg.ClusterPolicies > 0 {
		withCNPs = benchCluster(sb)
		if err := addClusterPolicies(withCNPs, benchClusterPolicies(cfg.ClusterPolicies)); err != nil {
			return nil, err
		}
	}
	for _, n := range sb.Topology.Nodes {
		maps, closeMaps, err := datapath.OpenPinnedForWriting(n.PinDir)
		if err != nil {
			return nil, err
		}
		defer closeMaps()
		c := policy.NewCompiler()
		name := n.Name
		on := c.Compile(cl, func(p *model.Pod) bool { return p.Node == name }, []netip.Addr{n.IP4, n.IP6})
		nt := nodeTables{maps: maps, on: on, off: &policy.Tables{}}
		if withCNPs != nil {
			t0 := time.Now()
			nt.cluster = policy.NewCompiler().Compile(withCNPs, func(p *model.Pod) bool { return p.Node == name }, []netip.Addr{n.IP4, n.IP6})
			if n.Name == sb.Topology.Nodes[0].Name {
				rep.ClusterTables = fmt.Sprintf("node1: %d identities, %d endpoints, %d entries, %d of them the tier sets' (compiled in %.0f ms)",
					len(nt.cluster.Peers), len(nt.cluster.Endpoints), len(nt.cluster.Entries)+len(nt.cluster.Verdicts), len(nt.cluster.Verdicts), ms(time.Since(t0)))
			}
		}
		nodes = append(nodes, nt)
		if n.Name == sb.Topology.Nodes[0].Name {
			rep.Tables = fmt.Sprintf("node1: %d identities, %d endpoints, %d entries", len(on.Peers), len(on.Endpoints), len(on.Entries))
		}
	}
	apply := func(mode string) error {
		for i := range nodes {
			n := &nodes[i]
			want := n.off
			switch mode {
			case "policies", "quiet":
				want = n.on
			case "cluster":
				want = n.cluster
			}
			if err := policy.Sync(n.maps, n.have, want); err != nil {
				return err
			}
			n.have = want
		}
		return nil
	}
	defer apply("none") //nolint:errcheck

	points := map[string]*PolicyPoint{}
	var order []string
	// Each target is measured in every mode back to back, in an order
	// that turns every run (the machine's noise comes in bursts of
	// seconds): none, the policies, and quiet (the policies with the
	// datapath's verdict events off, new connections only: the events
	// are one per judged side of a connection).
	setMode := func(mode string) (restore func() error, err error) {
		if err := apply(mode); err != nil {
			return func() error { return nil }, err
		}
		if mode != "quiet" {
			return func() error { return nil }, nil
		}
		return verdictEventsOff(nodes)
	}
	type target struct {
		key, fam, placement string
		addr                netip.Addr
	}
	var all []target
	for _, t := range targets {
		for _, fam := range []string{"IPv4", "IPv6"} {
			addr := t.pod.IP4
			if fam == "IPv6" {
				addr = t.pod.IP6
			}
			all = append(all, target{fam + " " + t.placement, fam, t.placement, addr})
		}
	}
	modes := []string{"none", "policies", "quiet"}
	if withCNPs != nil {
		modes = []string{"none", "policies", "cluster"}
	}
	for run := 1; run <= cfg.Runs; run++ {
		seq := modes
		if run%2 == 0 {
			seq = slices.Clone(modes)
			slices.Reverse(seq)
		}
		for _, t := range all {
			p, ok := points[t.key]
			if !ok {
				p = &PolicyPoint{Family: t.fam, Placement: t.placement, Raw: map[string][]native.Result{}}
				points[t.key] = p
				order = append(order, t.key)
			}
			for _, mode := range seq {
				restore, err := setMode(mode)
				if err == nil {
					err = measurePolicyMode(cfg, sb, client.Name, ncperf, run, mode, t.key, t.addr, p)
				}
				if rerr := restore(); err == nil {
					err = rerr
				}
				if err != nil {
					return nil, err
				}
			}
		}
	}
	// Where a connection's time goes: netcube's programs' share in each
	// mode, in runs of their own (the statistics cost two clock reads
	// per program run), back to back per target.
	bpfPerConn := map[string]bpfCost{}
	conns := map[string]float64{}
	for _, t := range all {
		for _, mode := range modes {
			restore, err := setMode(mode)
			var c bpfCost
			var n float64
			if err == nil {
				c, n, err = profiledCRR(sb, client.Name, ncperf, t.addr)
			}
			if rerr := restore(); err == nil {
				err = rerr
			}
			key := mode + " " + t.key
			if err != nil {
				return nil, fmt.Errorf("%s: BPF statistics: %w", key, err)
			}
			bpfPerConn[key], conns[key] = c, n
			fmt.Fprintf(cfg.Log, "  bpf_stats %-26s %6.0f ns, %4.1f runs per connection\n", key, float64(c.ns)/n, float64(c.runs)/n)
		}
	}
	med := func(rs []native.Result, f func(native.Result) float64) float64 {
		return pctl(ncField(rs, f), 0.5)
	}
	for _, k := range order {
		p := points[k]
		p.None = PolicyFigures{ConnPerSec: med(p.Raw["none crr"], func(r native.Result) float64 { return r.PerSec }),
			RRP99: med(p.Raw["none rr"], func(r native.Result) float64 { return r.P99 })}
		p.Policies = PolicyFigures{ConnPerSec: med(p.Raw["policies crr"], func(r native.Result) float64 { return r.PerSec }),
			RRP99: med(p.Raw["policies rr"], func(r native.Result) float64 { return r.P99 })}
		figs := []struct {
			mode string
			to   *PolicyFigures
		}{{"none", &p.None}, {"policies", &p.Policies}}
		if withCNPs != nil {
			p.Cluster = &PolicyFigures{ConnPerSec: med(p.Raw["cluster crr"], func(r native.Result) float64 { return r.PerSec }),
				RRP99: med(p.Raw["cluster rr"], func(r native.Result) float64 { return r.P99 })}
			figs = append(figs, struct {
				mode string
				to   *PolicyFigures
			}{"cluster", p.Cluster})
		}
		for _, f := range figs {
			k := f.mode + " " + p.Family + " " + p.Placement
			f.to.BPFNsPerConn = float64(bpfPerConn[k].ns) / conns[k]
			f.to.BPFRunsPerConn = float64(bpfPerConn[k].runs) / conns[k]
		}
		if q := "quiet " + p.Family + " " + p.Placement; conns[q] > 0 {
			p.Policies.BPFNsPerConnQuiet = float64(bpfPerConn[q].ns) / conns[q]
			p.Policies.ConnPerSecQuiet = med(p.Raw["quiet crr"], func(r native.Result) float64 { return r.PerSec })
		}
		rep.Points = append(rep.Points, *p)
	}
	if cfg.KubeNetworkPolicies != "" {
		if err := apply("none"); err != nil {
			return nil, err
		}
		rep.KubeNetworkPolicies = tryKNPOnSandbox(cfg, sb, ncperf)
	}
	if cfg.OutDir != "" {
		write := rep.write
		if withCNPs != nil {
			write = rep.writeCluster
		}
		if err := write(cfg.OutDir); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// measurePolicyMode measures one target in one mode: new connections,
// and (but quiet) request/response.
func measurePolicyMode(cfg PolicyConfig, sb *sandbox.Sandbox, client, ncperf string, run int, mode, key string, addr netip.Addr,
	p *PolicyPoint) error {
	crr, err := ncperfRun(sb, client, ncperf, "crr", addr, cfg.Duration)
	if err != nil {
		return fmt.Errorf("%s, %s: %w", key, mode, err)
	}
	p.Raw[mode+" crr"] = append(p.Raw[mode+" crr"], crr)
	if mode == "quiet" {
		fmt.Fprintf(cfg.Log, "  run %d %-8s %-16s %7.0f conn/s\n", run, mode, key, crr.PerSec)
		return nil
	}
	rr, err := ncperfRun(sb, client, ncperf, "rr", addr, cfg.Duration)
	if err != nil {
		return fmt.Errorf("%s, %s: %w", key, mode, err)
	}
	p.Raw[mode+" rr"] = append(p.Raw[mode+" rr"], rr)
	fmt.Fprintf(cfg.Log, "  run %d %-8s %-16s %7.0f conn/s, rr p99 %6.1f µs\n", run, mode, key, crr.PerSec, rr.P99)
	return nil
}

// verdictEventsOff turns the datapath's policy verdict events off on
// every node, as the agent's --monitor-policy=false would; restore puts
// back what the agents had set.
func verdictEventsOff(nodes []nodeTables) (restore func() error, err error) {
	var was []datapath.MonFlags
	restore = func() error {
		for i, f := range was {
			if err := monitor.SetFlags(nodes[i].maps, f); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range nodes {
		c, _, err := cube.Get[uint32, datapath.MonConfig](n.maps, monitor.MapConfig, 0)
		if err != nil {
			return restore, err
		}
		was = append(was, c.Flags)
		if err := monitor.SetFlags(n.maps, c.Flags&^datapath.MonFlagPolicy); err != nil {
			return restore, err
		}
	}
	return restore, nil
}

// profiledCRR runs 1 s of new connections from client to addr with the
// kernel's BPF statistics on, and returns what netcube's programs ran
// meanwhile and how many connections were made.
func profiledCRR(sb *sandbox.Sandbox, client, ncperf string, addr netip.Addr) (bpfCost, float64, error) {
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return bpfCost{}, 0, err
	}
	defer stats.Close()
	c0, err := netcubeBPFCost()
	if err != nil {
		return bpfCost{}, 0, err
	}
	r, err := ncperfRun(sb, client, ncperf, "crr", addr, time.Second)
	if err != nil {
		return bpfCost{}, 0, err
	}
	c1, err := netcubeBPFCost()
	if err != nil {
		return bpfCost{}, 0, err
	}
	if r.Ops == 0 {
		return bpfCost{}, 0, fmt.Errorf("ncperf crr to %s: no connection", addr)
	}
	return bpfCost{runs: c1.runs - c0.runs, ns: c1.ns - c0.ns}, float64(r.Ops), nil
}

type nodeTables struct {
	maps    *cube.Maps
	have    *policy.Tables
	on, off *policy.Tables
	cluster *policy.Tables // the policies and the ClusterNetworkPolicies
}

// benchCluster is policy.ScaleCluster plus the sandbox's benchmark pods in
// namespace bench: the client may send only to the servers (on the
// benchmark's port), the servers accept only the client.
func benchCluster(sb *sandbox.Sandbox) *policy.Cluster {
	var names []string
	for _, n := range sb.Topology.Nodes {
		names = append(names, n.Name)
	}
	cl := policy.ScaleCluster(10, 20, 100, names)
	cl.SetNamespace("bench", &model.Namespace{Name: "bench", Labels: map[string]string{nsNameLabel: "bench"}})
	add := func(p sandbox.Pod, role string) {
		id := model.PodID{Namespace: "bench", Name: p.Name}
		cl.SetPod(id, &model.Pod{ID: id, Labels: map[string]string{"role": role}, Node: p.Node, IPs: []netip.Addr{p.IP4, p.IP6}})
	}
	add(sb.Topology.Nodes[0].Pods[0], "client")
	add(sb.Topology.Nodes[0].Pods[1], "server")
	add(sb.Topology.Nodes[1].Pods[0], "server")
	client, _ := labels.Parse("role=client")
	server, _ := labels.Parse("role=server")
	port := []model.PolicyPort{{Proto: model.TCP, Port: podnetRRPort}}
	in := model.PolicyID{Namespace: "bench", Name: "servers"}
	cl.SetPolicy(in, &model.Policy{ID: in, Pods: server, IsolatesIngress: true,
		Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: client}}, Ports: port}}})
	out := model.PolicyID{Namespace: "bench", Name: "client"}
	cl.SetPolicy(out, &model.Policy{ID: out, Pods: client, IsolatesEgress: true,
		Egress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: server}}, Ports: port}}})
	return cl
}

// Targets: within 3% of no policy.
const policyTolerance = 0.03

func (r *PolicyReport) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "policy.md"), []byte(r.Markdown()), 0o644)
}

// Markdown renders the report.
func (r *PolicyReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# NetworkPolicy: per-packet cost\n\n")
	fmt.Fprintf(&b, "Measured at netcube commit `%s` on %s, %s, by `%s` (%d runs of %.0f s per figure, each target measured with no policy, the policies, and the policies without verdict events back to back, the order reversed every other run; medians).\n\n",
		r.Commit, r.MeasuredAt.Format("2006-01-02"), r.Machine, r.Command, r.Runs, r.DurationS)
	fmt.Fprintf(&b, "With policies: %s (%s). The client pod is egress-isolated and the servers ingress-isolated, each allowed by one rule, so every new connection is judged on both ends: the peer's identity and the entry lookups. Native code (ncperf), client and server pinned to one CPU. The reference is netcube with no policy (`sigs.k8s.io/kube-network-policies`, on the module proxy, cannot enforce on this kernel: docs/benchmarks/cluster-policy.md).\n\n", r.Scale, r.Tables)
	fmt.Fprintf(&b, "Targets: new connections/s and request/response p99 within %.0f%% of no policy.\n\n", policyTolerance*100)
	b.WriteString("| path | conn/s, no policy | conn/s, policies | ratio | target | rr p99 µs, no policy | rr p99 µs, policies | ratio | target | conn/s, policies without verdict events | ratio |\n")
	b.WriteString("|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|\n")
	for _, p := range r.Points {
		c := p.Policies.ConnPerSec / p.None.ConnPerSec
		l := p.Policies.RRP99 / p.None.RRP99
		quiet, qr := "n/a", "n/a"
		if p.Policies.ConnPerSecQuiet > 0 {
			quiet, qr = fmt.Sprintf("%.0f", p.Policies.ConnPerSecQuiet), fmt.Sprintf("%.3f", p.Policies.ConnPerSecQuiet/p.None.ConnPerSec)
		}
		fmt.Fprintf(&b, "| %s %s | %.0f | %.0f | %.3f | %s | %.1f | %.1f | %.3f | %s | %s | %s |\n", p.Family, p.Placement,
			p.None.ConnPerSec, p.Policies.ConnPerSec, c, met(c >= 1-policyTolerance),
			p.None.RRP99, p.Policies.RRP99, l, met(l <= 1+policyTolerance), quiet, qr)
	}
	b.WriteString("\nThe runs' spread, new connections/s [min–max] of each mode (a ratio the spread of one mode's own runs covers says nothing about the policies):\n\n")
	b.WriteString("| path | no policy | policies | policies without verdict events |\n|---|---|---|---|\n")
	for _, p := range r.Points {
		spread := func(mode string) string {
			xs := ncField(p.Raw[mode+" crr"], func(r native.Result) float64 { return r.PerSec })
			if len(xs) == 0 {
				return "n/a"
			}
			lo, hi := xs[0], xs[0]
			for _, x := range xs {
				lo, hi = min(lo, x), max(hi, x)
			}
			return fmt.Sprintf("%.0f–%.0f (±%.0f%% of the median)", lo, hi, 50*(hi-lo)/pctl(xs, 0.5))
		}
		fmt.Fprintf(&b, "| %s %s | %s | %s | %s |\n", p.Family, p.Placement, spread("none"), spread("policies"), spread("quiet"))
	}
	b.WriteString("\nThe target is judged with the agent's defaults, which report a policy verdict event per judged side of each allowed connection (Hubble's policy verdicts); the last two columns are the same policies with those events off (`--monitor-policy=false`), measured back to back with the other two.\n")
	b.WriteString("\n## Where a connection's time goes\n\n")
	b.WriteString("A new connection's time on the CPU is 1/(conn/s); the policies add the difference. netcube's programs' own share of it (the tc programs and socket hooks of every node, their map lookups and helpers included) is from the kernel's BPF statistics, in a 1 s run of new connections of its own per path and mode, the modes back to back, after the measured runs.\n\n")
	b.WriteString("| path | µs per connection, no policy | policies | added | BPF ns per connection, no policy | policies | added by policy | BPF share of what the policies add | of the added BPF ns, the verdict events' | program runs per connection |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		tn, tp := 1e6/p.None.ConnPerSec, 1e6/p.Policies.ConnPerSec
		added := p.Policies.BPFNsPerConn - p.None.BPFNsPerConn
		events := "n/a"
		if p.Policies.BPFNsPerConnQuiet > 0 {
			events = fmt.Sprintf("%.0f", p.Policies.BPFNsPerConn-p.Policies.BPFNsPerConnQuiet)
		}
		fmt.Fprintf(&b, "| %s %s | %.1f | %.1f | %.2f | %.0f | %.0f | %.0f | %.0f%% | %s | %.1f |\n", p.Family, p.Placement,
			tn, tp, tp-tn, p.None.BPFNsPerConn, p.Policies.BPFNsPerConn, added, 100*added/((tp-tn)*1000), events, p.Policies.BPFRunsPerConn)
	}
	b.WriteString("\nThe verdict events' share: the policies' BPF time per connection with the datapath's policy verdict events on (the agent's default) less the same with them off (`--monitor-policy=false`), in runs of their own: each allowed connection is reported once per judged side, for Hubble's policy verdicts.\n")
	b.WriteString("\nThe machine is shared and noisy: compare the ratios of one run, not figures across runs. A policy change reaching the maps: `go test ./pkg/cubes/policy -run PolicyChangeLatency -v`.\n")
	return b.String()
}

// met marks a target as the committed policy report does.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}
