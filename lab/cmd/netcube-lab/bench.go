package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netcube/netcube/lab/bench"
	"github.com/netcube/netcube/lab/kubeenv"
)

func benchCmd(args []string) error {
	if len(args) > 0 && args[0] == "sync" {
		return benchSync(args[1:])
	}
	if len(args) > 0 && args[0] == "compare" {
		return benchCompare(args[1:])
	}
	if len(args) > 0 && args[0] == "podnet" {
		return benchPodnet(args[1:])
	}
	if len(args) > 0 && args[0] == "policy" {
		return benchPolicy(args[1:])
	}
	if len(args) > 0 && args[0] == "policy-latency" {
		return benchPolicyLatency(args[1:])
	}
	if len(args) > 0 && args[0] == "reliability" {
		return benchReliability(args[1:])
	}
	if len(args) > 0 && args[0] == "observability" {
		return benchObservability(args[1:])
	}
	if len(args) > 0 && args[0] == "slices" {
		return benchSlices(args[1:])
	}
	if len(args) > 0 && args[0] == "nodeport" {
		return benchNodePort(args[1:])
	}
	if len(args) > 0 && args[0] == "scale" {
		return benchScale(args[1:])
	}
	if len(args) > 0 && args[0] == "scale-l2" {
		return benchScaleL2(args[1:])
	}
	if len(args) > 0 && args[0] == "synflood" {
		return benchSynFlood(args[1:])
	}
	if len(args) > 0 && args[0] == "failover" {
		return benchFailover(args[1:])
	}
	if len(args) == 0 || args[0] != "datapath" {
		return errors.New("usage: netcube-lab bench datapath|sync|compare|podnet|policy|policy-latency|reliability|observability|slices|nodeport|scale|scale-l2|synflood|failover [flags]")
	}
	fs := flag.NewFlagSet("bench datapath", flag.ExitOnError)
	cfg := bench.DatapathConfig{Log: os.Stdout}
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "length of each measurement")
	fs.IntVar(&cfg.Runs, "runs", 5, "repetitions (medians are reported)")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for datapath.json and datapath.md (\"\": none)")
	_ = fs.Parse(args[1:])
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	results, err := bench.Datapath(&cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(bench.Markdown(cfg, results))
	return nil
}

func benchSync(args []string) error {
	fs := flag.NewFlagSet("bench sync", flag.ExitOnError)
	services := fs.String("services", "1000,10000,30000,100000", "cluster sizes (Services), ascending")
	endpoints := fs.String("endpoints", "1,10", "endpoints per Service")
	cfg := bench.SyncConfig{Log: os.Stdout}
	fs.IntVar(&cfg.Changes, "changes", 100, "endpoint changes timed per size")
	fs.IntVar(&cfg.Starts, "starts", 3, "agent starts (and restarts) per size; full-sync figures are their medians")
	fs.BoolVar(&cfg.GzipLists, "gzip-lists", false, "also start the agent with --api-compression before each first start, and report what gzip-compressed lists cost")
	pageSizes := fs.String("page-sizes", "", "also start the agent with each of these --api-list-page-size values before each first start, and report what the list page size costs")
	fs.BoolVar(&cfg.Merge, "merge", false, "add to the points already in the report instead of replacing it")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for sync.json and sync.md (\"\": none)")
	_ = fs.Parse(args)
	var err error
	if cfg.Services, err = ints(*services); err != nil {
		return err
	}
	if cfg.Endpoints, err = ints(*endpoints); err != nil {
		return err
	}
	if *pageSizes != "" {
		if cfg.PageSizes, err = ints(*pageSizes); err != nil {
			return fmt.Errorf("--page-sizes: %w", err)
		}
		for _, size := range cfg.PageSizes {
			if size <= 0 {
				return fmt.Errorf("--page-sizes %q: %d is not a number of objects", *pageSizes, size)
			}
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	results, err := bench.Sync(cfg)
	if err != nil {
		return err
	}
	fmt.Print(bench.SyncMarkdown(cfg, results, time.Now()))
	return nil
}

func benchScale(args []string) error {
	fs := flag.NewFlagSet("bench scale", flag.ExitOnError)
	agents := fs.String("agents", "10,50,100,200", "numbers of hollow agents (--datapath=memory), ascending")
	cfg := bench.ScaleConfig{Log: os.Stdout}
	fs.IntVar(&cfg.Services, "services", 10000, "Services in the cluster")
	fs.IntVar(&cfg.Endpoints, "endpoints", 5, "endpoints per Service")
	fs.IntVar(&cfg.Pods, "pods", 1000, "running pods, spread over the nodes")
	fs.IntVar(&cfg.Policies, "policies", 100, "NetworkPolicies")
	fs.Float64Var(&cfg.Rate, "rate", 10, "endpoint changes per second during the stream")
	fs.Float64Var(&cfg.PodRate, "pod-rate", 10, "pod status changes (Ready flipped) per second during the stream (0: none)")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the stream of changes lasts, per number of agents")
	fs.DurationVar(&cfg.PolicyEvery, "policy-every", time.Second, "a NetworkPolicy edited this often during the stream (0: none)")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for <name>.json, <name>.md and plots/ (\"\": none)")
	fs.StringVar(&cfg.Name, "name", "scale", "the report's name")
	fs.BoolVar(&cfg.ClusterPerN, "cluster-per-n", false, "a cluster of its own for each N, with N Nodes and the pods spread over them (else one of the largest N's nodes)")
	fs.StringVar(&cfg.ProfileDir, "apiserver-profile", "", "directory for a CPU profile of the API server over each start of the agents")
	fs.IntVar(&cfg.ProfileSeconds, "profile-seconds", 40, "how long each API server profile lasts")
	variants := fs.String("variants", "lists", "how the agents ask the API server, each measured at every N: "+strings.Join(bench.ScaleVariants(), ", "))
	_ = fs.Parse(args)
	var err error
	if cfg.Agents, err = ints(*agents); err != nil {
		return err
	}
	cfg.Variants = strings.Split(*variants, ",")
	if len(cfg.Agents) == 0 || cfg.Rate <= 0 || cfg.Duration <= 0 {
		return errors.New("bench scale: --agents needs at least one number, --rate and --duration must be positive")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	results, err := bench.Scale(cfg)
	if err != nil {
		return err
	}
	fmt.Print(bench.ScaleMarkdown(cfg, results, time.Now()))
	return nil
}

func benchScaleL2(args []string) error {
	fs := flag.NewFlagSet("bench scale-l2", flag.ExitOnError)
	agents := fs.String("agents", "100", "numbers of hollow agents (--datapath=memory), ascending")
	cfg := bench.ScaleL2Config{Log: os.Stdout}
	fs.IntVar(&cfg.Services, "services", 1000, "LoadBalancer Services (half externalTrafficPolicy Local)")
	fs.DurationVar(&cfg.Window, "window", time.Minute, "how long each point's steady state is measured")
	fs.DurationVar(&cfg.Interval, "heartbeat-interval", time.Second, "the agents' --l2-heartbeat-interval in the elected mode")
	fs.IntVar(&cfg.Rounds, "rounds", 1, "times each mode is measured at each N, by turns")
	fs.DurationVar(&cfg.LeaseRenew, "lease-renew", 2*time.Second, "how often the replay of one Lease per Service renews each (Cilium's leaseRetryPeriod; 0: no replay)")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for <name>.json, <name>.md and plots/<name>.svg (\"\": none)")
	fs.StringVar(&cfg.Name, "name", "scale-l2", "the report's name")
	_ = fs.Parse(args)
	var err error
	if cfg.Agents, err = ints(*agents); err != nil {
		return fmt.Errorf("--agents: %w", err)
	}
	switch {
	case len(cfg.Agents) == 0 || cfg.Agents[0] < 2 || !slices.IsSorted(cfg.Agents):
		return fmt.Errorf("bench scale-l2: --agents %q: want numbers of at least 2 (one is killed), ascending", *agents)
	case cfg.Services <= 0 || cfg.Services > 2767:
		return fmt.Errorf("bench scale-l2: --services %d: want 1 to 2767 (each Local one takes a health-check node port)", cfg.Services)
	case cfg.Window <= 0 || cfg.Interval <= 0 || cfg.LeaseRenew < 0:
		return errors.New("bench scale-l2: --window and --heartbeat-interval must be positive, --lease-renew not negative")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	_, err = bench.ScaleL2(cfg)
	return err
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchCompare: netcube against the real kube-proxy as Services grow.
func benchCompare(args []string) error {
	fs := flag.NewFlagSet("bench compare", flag.ExitOnError)
	sizes := fs.String("services", "1,1000,5000,10000,30000", "numbers of other Services in the cluster, ascending")
	peers := fs.String("peers", "", "data planes to run, comma-separated (default: netcube,iptables-nft,iptables-legacy,nftables)")
	quick := fs.Bool("quick", false, "tiny sizes and short runs: checks the harness end to end")
	reportOnly := fs.Bool("report-only", false, "render compare.md and the plots again from --out's compare.json; measure nothing")
	cfg := bench.CompareConfig{Log: os.Stdout}
	fs.BoolVar(&cfg.Merge, "merge", false, "keep --out's earlier points at the sizes not measured now (add a size to a report)")
	fs.IntVar(&cfg.KubeProxyMax, "kube-proxy-max", 30000, "largest size kube-proxy runs at (0: every size)")
	fs.IntVar(&cfg.KubeProxyChangesMax, "kube-proxy-changes-max", 0, "largest size at which kube-proxy's endpoint changes and rolling update are timed (0: every size it runs at)")
	fs.IntVar(&cfg.MinSyncZeroMax, "min-sync-zero-max", 10000, "up to this size, also time kube-proxy's endpoint changes with its minimum sync period at 0 (shipped: 1 s); 0: never")
	fs.DurationVar(&cfg.Duration, "duration", 2*time.Second, "length of each throughput, latency and rate measurement")
	fs.IntVar(&cfg.Runs, "runs", 3, "repetitions (medians are reported)")
	fs.IntVar(&cfg.Reactions, "reactions", 3, "endpoint scale-up/down pairs timed per family")
	fs.DurationVar(&cfg.ChurnFor, "churn", 8*time.Second, "length of the rolling-update run")
	fs.DurationVar(&cfg.ChurnEvery, "churn-every", time.Second, "one replica replaced this often during the rolling update")
	fs.DurationVar(&cfg.SyncTimeout, "sync-timeout", 2*time.Hour, "longest wait for a data plane to program every Service or change")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for compare.{json,md} and plots/ (\"\": none)")
	fs.Func("agent-arg", "a flag for netcube's agent (repeat for more), e.g. --agent-arg=--api-list-page-size=2000", func(v string) error {
		cfg.AgentArgs = append(cfg.AgentArgs, v)
		return nil
	})
	_ = fs.Parse(args)
	if *reportOnly {
		rep, err := bench.LoadCompareReport(cfg.OutDir)
		if err != nil {
			return err
		}
		return rep.Write(cfg.OutDir)
	}
	cfg.Command = "bin/netcube-lab bench compare " + strings.Join(args, " ")
	if *quick {
		*sizes, cfg.Duration, cfg.Runs, cfg.Reactions = "1,100", time.Second, 1, 1
		cfg.ChurnFor, cfg.ChurnEvery = 2*time.Second, 500*time.Millisecond
	}
	var err error
	if cfg.Sizes, err = ints(*sizes); err != nil {
		return err
	}
	if *peers != "" {
		cfg.Peers = strings.Split(*peers, ",")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	if cfg.ToolsDir, err = kubeenv.ToolsDir(); err != nil {
		return err
	}
	rep, err := bench.Compare(cfg)
	if rep != nil && cfg.OutDir != "" {
		fmt.Printf("report: %s\n", filepath.Join(cfg.OutDir, "compare.md"))
	}
	return err
}

// benchPodnet: netcube's pod network against flannel (docs/benchmarks/podnet.md).
func benchPodnet(args []string) error {
	fs := flag.NewFlagSet("bench podnet", flag.ExitOnError)
	cfg := bench.PodnetConfig{Log: os.Stdout}
	peers := fs.String("peers", "", "peers, comma-separated (default: "+strings.Join(bench.PodnetPeers, ",")+")")
	fs.IntVar(&cfg.Runs, "runs", 3, "repetitions (medians are reported)")
	fs.DurationVar(&cfg.Duration, "duration", 3*time.Second, "length of each measurement")
	fs.IntVar(&cfg.Startups, "startups", 100, "pods whose CNI ADD is timed, per peer")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for podnet.{json,md} and plots/ (\"\": none)")
	reportOnly := fs.Bool("report-only", false, "render podnet.md and the plots again from --out's podnet.json; measure nothing")
	_ = fs.Parse(args)
	if *reportOnly {
		rep, err := bench.RenderPodnet(cfg.OutDir)
		if err != nil {
			return err
		}
		fmt.Print(rep.Markdown())
		return nil
	}
	if *peers != "" {
		cfg.Peers = strings.Split(*peers, ",")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	if os.Getenv("NETCUBE_TOOLS_DIR") == "" { // flannel's kube-apiserver
		dir, err := kubeenv.ToolsDir()
		if err != nil {
			return err
		}
		os.Setenv("NETCUBE_TOOLS_DIR", dir)
	}
	rep, err := bench.RunPodnet(cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(rep.Markdown())
	return nil
}

// benchPolicy: NetworkPolicy's per-packet cost (docs/benchmarks/policy.md).
func benchPolicy(args []string) error {
	fs := flag.NewFlagSet("bench policy", flag.ExitOnError)
	cfg := bench.PolicyConfig{Log: os.Stdout}
	fs.IntVar(&cfg.Runs, "runs", 3, "repetitions (medians are reported)")
	fs.DurationVar(&cfg.Duration, "duration", 3*time.Second, "length of each measurement")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for policy.{json,md}, or cluster-policy.{json,md} with --cluster-policies (\"\": none)")
	fs.IntVar(&cfg.ClusterPolicies, "cluster-policies", 0, "add the mode NetworkPolicy + this many Admin-tier and as many Baseline-tier ClusterNetworkPolicies (in place of the quiet mode; report cluster-policy.*)")
	knp := fs.Bool("kube-network-policies", false, "also run sigs.k8s.io/kube-network-policies "+bench.KNPVersion+" on node1 (hack/build-kube-network-policies.sh) and report what it did")
	_ = fs.Parse(args)
	if *knp {
		dir, err := kubeenv.CachedBuild("NETCUBE_KNP_DIR", "build-kube-network-policies.sh")
		if err != nil {
			return err
		}
		cfg.KubeNetworkPolicies = dir
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	rep, err := bench.RunPolicy(cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	if cfg.ClusterPolicies > 0 {
		fmt.Print(rep.ClusterMarkdown())
		return nil
	}
	fmt.Print(rep.Markdown())
	return nil
}

// benchPolicyLatency: a NetworkPolicy change from the API write to the
// maps, and memory per policy (docs/benchmarks/policy-latency.md).
func benchPolicyLatency(args []string) error {
	fs := flag.NewFlagSet("bench policy-latency", flag.ExitOnError)
	cfg := bench.PolicyLatencyConfig{Log: os.Stdout}
	fs.IntVar(&cfg.Namespaces, "namespaces", 10, "namespaces")
	fs.IntVar(&cfg.PodsPerNS, "pods", 20, "pods per namespace")
	policies := fs.String("policies", "1,10,100,1000", "NetworkPolicies per namespace: the stages, ascending")
	fs.IntVar(&cfg.Changes, "changes", 100, "changes timed of each kind, per stage")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for policy-latency.{json,md}, or cluster-policy-latency.{json,md} with --cluster-policies (\"\": none)")
	ownCPU := fs.Bool("own-cpu", true, "time each stage's changes a second time with the agent on a CPU of its own")
	cnps := fs.String("cluster-policies", "", "ClusterNetworkPolicy stages after the NetworkPolicy stages, ascending (e.g. 10,100,1000; report cluster-policy-latency.*)")
	knp := fs.Bool("kube-network-policies", false, "also run sigs.k8s.io/kube-network-policies "+bench.KNPVersion+" against the same API server (hack/build-kube-network-policies.sh)")
	_ = fs.Parse(args)
	cfg.NoOwnCPU = !*ownCPU
	if *cnps != "" {
		var err error
		if cfg.ClusterPolicies, err = ints(*cnps); err != nil {
			return fmt.Errorf("--cluster-policies: %w", err)
		}
	}
	if *knp {
		dir, err := kubeenv.CachedBuild("NETCUBE_KNP_DIR", "build-kube-network-policies.sh")
		if err != nil {
			return err
		}
		cfg.KubeNetworkPolicies = dir
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	if cfg.PoliciesPerNS, err = ints(*policies); err != nil {
		return fmt.Errorf("--policies: %w", err)
	}
	rep, err := bench.RunPolicyLatency(cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	if rep.Cluster != nil {
		fmt.Print(rep.Cluster.Markdown())
		return nil
	}
	fmt.Print(rep.Markdown())
	return nil
}

// benchReliability renders what the fault tests recorded (`make
// reliability` runs them, long versions, then this) as
// docs/benchmarks/reliability.{json,md}.
func benchReliability(args []string) error {
	fs := flag.NewFlagSet("bench reliability", flag.ExitOnError)
	in := fs.String("in", "", "the fault records (JSON lines; the tests append to $NETCUBE_RELIABILITY_OUT)")
	out := fs.String("out", "docs/benchmarks", "directory for reliability.{json,md} and plots/reliability.svg")
	runs := fs.String("runs", "", "the runs' results, a line \"RUN EXIT\" each (make reliability writes it)")
	_ = fs.Parse(args)
	if *in == "" {
		return errors.New("usage: netcube-lab bench reliability --in RECORDS [--out DIR]; `make reliability` runs the fault tests and this")
	}
	rep, err := bench.ReadReliability(*in)
	if err == nil && *runs != "" {
		err = rep.ReadReliabilityRuns(*runs)
	}
	if err != nil {
		return err
	}
	if err := rep.Write(*out); err != nil {
		return err
	}
	fmt.Print(rep.Markdown())
	return nil
}

func benchSynFlood(args []string) error {
	fs := flag.NewFlagSet("bench synflood", flag.ExitOnError)
	cfg := bench.SynFloodConfig{Log: os.Stdout}
	fs.IntVar(&cfg.Runs, "runs", 2, "floods with early drop off and on, alternating (each in a sandbox of its own)")
	fs.IntVar(&cfg.TableSize, "ct-entries", 262144, "node1's conntrack entries (--ct-map-size; the agent's default)")
	fs.Float64Var(&cfg.Rate, "rate", 10000, "spoofed SYNs a second")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "length of each flood")
	fs.IntVar(&cfg.Held, "held", 100, "connections established before each flood")
	fs.DurationVar(&cfg.NewEvery, "new-every", 100*time.Millisecond, "a new connection this often during the flood")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for synflood.{json,md} and plots/synflood.svg (\"\": none)")
	_ = fs.Parse(args)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	rep, err := bench.SynFlood(cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(rep.Markdown())
	return nil
}

func benchFailover(args []string) error {
	fs := flag.NewFlagSet("bench failover", flag.ExitOnError)
	cfg := bench.FailoverConfig{Log: os.Stdout}
	fs.IntVar(&cfg.Runs, "runs", 3, "each fault this many times (each in a routed sandbox of its own)")
	fs.DurationVar(&cfg.Hold, "hold", 3*time.Second, "the BGP sessions' hold time (3 s: RFC 4271's least)")
	fs.DurationVar(&cfg.Interval, "interval", 10*time.Millisecond, "between the client's new connections")
	fs.DurationVar(&cfg.Timeout, "timeout", 200*time.Millisecond, "a connection not answered within it failed")
	fs.DurationVar(&cfg.Before, "before", 3*time.Second, "measured before the fault")
	fs.DurationVar(&cfg.After, "after", 8*time.Second, "measured after the fault")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for failover.{json,md} and plots/failover.svg (\"\": none)")
	modes := fs.String("modes", "bgp,l2", "how the address reaches the client: bgp (the routed sandbox), l2 (the nodes' link, one elected announcer)")
	_ = fs.Parse(args)
	cfg.Modes = strings.Split(*modes, ",")
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	rep, err := bench.Failover(cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(rep.Markdown())
	return nil
}

func benchObservability(args []string) error {
	fs := flag.NewFlagSet("bench observability", flag.ExitOnError)
	cfg := bench.ObservabilityConfig{Log: os.Stdout}
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "length of each measurement")
	fs.IntVar(&cfg.Runs, "runs", 5, "repetitions (medians are reported)")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for observability.json, observability.md and plots (\"\": none)")
	_ = fs.Parse(args)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	tools, err := kubeenv.ToolsDir()
	if err != nil {
		return err
	}
	cfg.Hubble = filepath.Join(tools, "hubble")
	r, err := bench.Observability(&cfg)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(bench.ObservabilityMarkdown(cfg, r))
	return nil
}

// benchSlices: the latency class of network slices under a saturated
// uplink, against the same node without slices and against kube-proxy
// (docs/benchmarks/slices.md).
func benchSlices(args []string) error {
	fs := flag.NewFlagSet("bench slices", flag.ExitOnError)
	cfg := bench.SlicesConfig{Log: os.Stdout}
	services := fs.String("services", "1,10000", "Services in the cluster (the measured one included), ascending")
	modes := fs.String("modes", strings.Join(bench.SlicesModes, ","), "modes, comma-separated, measured in this order in every run (htb-tc is a reference: netcube's HTB classes made with tc, no NetworkSlice)")
	fs.IntVar(&cfg.Runs, "runs", 3, "repetitions (medians are reported)")
	fs.DurationVar(&cfg.Duration, "duration", 5*time.Second, "length of each latency measurement (the bulk runs 3s longer around the loaded one)")
	fs.StringVar(&cfg.UplinkRate, "uplink-rate", "1G", "the agents' --uplink-rate (bits/s), and the one-class shaper's rate in the modes without slices: the uplink's bottleneck")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for slices.{json,md} and the plots (\"\": none)")
	reportOnly := fs.Bool("report-only", false, "render slices.md and the plots again from --out's slices.json; measure nothing")
	_ = fs.Parse(args)
	if *reportOnly {
		rep, err := bench.LoadSlicesReport(cfg.OutDir)
		if err != nil {
			return err
		}
		return rep.Write(cfg.OutDir)
	}
	cfg.Command = "bin/netcube-lab bench slices " + strings.Join(args, " ")
	var err error
	if cfg.Services, err = ints(*services); err != nil {
		return err
	}
	cfg.Modes = strings.Split(*modes, ",")
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	if cfg.ToolsDir, err = kubeenv.ToolsDir(); err != nil { // kube-proxy, kube-apiserver, etcd
		return err
	}
	rep, err := bench.RunSlices(cfg)
	if rep != nil && cfg.OutDir != "" && slices.ContainsFunc(rep.Points, func(p bench.SlicesPoint) bool { return len(p.Runs) > 0 }) {
		fmt.Printf("report: %s\n", filepath.Join(cfg.OutDir, "slices.md"))
	}
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(rep.Markdown())
	return nil
}

// benchNodePort: an external client to a NodePort whose backend is on
// another node, node1's data plane tc, XDP or kube-proxy
// (docs/benchmarks/nodeport.md).
func benchNodePort(args []string) error {
	fs := flag.NewFlagSet("bench nodeport", flag.ExitOnError)
	cfg := bench.NodePortConfig{Log: os.Stdout}
	modes := fs.String("modes", strings.Join(bench.NodePortModes, ","), "modes, comma-separated, measured in this order in every run")
	families := fs.String("families", "IPv4,IPv6", "address families, comma-separated")
	fs.IntVar(&cfg.Runs, "runs", 3, "repetitions (medians are reported)")
	fs.DurationVar(&cfg.Duration, "duration", 3*time.Second, "length of each measurement (packets/s, throughput, latency)")
	fs.StringVar(&cfg.OutDir, "out", "docs/benchmarks", "directory for nodeport.{json,md} and plots/nodeport-accel-*.svg (\"\": none)")
	reportOnly := fs.Bool("report-only", false, "render nodeport.md and the plots again from --out's nodeport.json; measure nothing")
	_ = fs.Parse(args)
	if *reportOnly {
		rep, err := bench.LoadNodePortReport(cfg.OutDir)
		if err != nil {
			return err
		}
		return rep.Write(cfg.OutDir)
	}
	cfg.Command = "bin/netcube-lab bench nodeport " + strings.Join(args, " ")
	cfg.Modes, cfg.Families = strings.Split(*modes, ","), strings.Split(*families, ",")
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.BinDir = filepath.Dir(exe)
	if slices.Contains(cfg.Modes, bench.NodePortKubeProxy) {
		if cfg.ToolsDir, err = kubeenv.ToolsDir(); err != nil { // kube-proxy, kube-apiserver, etcd
			return err
		}
	}
	rep, err := bench.RunNodePort(cfg)
	if err != nil {
		return err
	}
	if cfg.OutDir != "" {
		fmt.Printf("report: %s\n", filepath.Join(cfg.OutDir, "nodeport.md"))
	}
	fmt.Println()
	fmt.Print(rep.Markdown())
	return nil
}
