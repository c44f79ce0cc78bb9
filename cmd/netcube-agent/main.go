// Command netcube-agent programs one node's eBPF datapath from the desired
// state of Services and EndpointSlices: the Kubernetes API, or a directory
// of YAML.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/netcube/netcube/pkg/agent"
	"github.com/netcube/netcube/pkg/datapath"
)

func main() {
	cfg := agent.Defaults()
	if host, err := os.Hostname(); err == nil {
		cfg.NodeName = host
	}
	if n := os.Getenv("NODE_NAME"); n != "" {
		cfg.NodeName = n
	}
	configFile := flag.String("config", "", "config file (YAML, fields as in pkg/agent.Config); flags given override it")
	cleanup := flag.Bool("cleanup", false, "remove everything pinned under --bpf-root (detaches the datapath, drops flow state) and exit")
	flag.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "kubeconfig of the API server (default: in-cluster config)")
	flag.StringVar(&cfg.Manifests, "manifests", cfg.Manifests, "instead of the API: a directory of Service and EndpointSlice YAML, watched for changes")
	flag.StringVar(&cfg.ProxyName, "proxy-name", cfg.ProxyName, "handle only Services labelled service.kubernetes.io/service-proxy-name=<this> (default: unlabelled ones)")
	flag.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "this node's name (default $NODE_NAME, then the hostname)")
	flag.StringVar(&cfg.BPFRoot, "bpf-root", cfg.BPFRoot, "bpffs directory for this node's pinned maps and links")
	flag.BoolVar(&cfg.SocketLB, "socket-lb", cfg.SocketLB, "translate pod->Service at connect time (cgroup hooks); off: per-packet tc path only")
	flag.StringVar(&cfg.Cgroup, "cgroup", cfg.Cgroup, "cgroup v2 directory holding the pods (socket-LB attaches here, never to the root cgroup)")
	flag.StringVar(&cfg.PodIfacePrefix, "pod-iface-prefix", cfg.PodIfacePrefix, "host-side pod veths are named <prefix>*")
	flag.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", cfg.MetricsBindAddress, "address of /metrics (\"\": off)")
	flag.StringVar(&cfg.HealthzBindAddress, "healthz-bind-address", cfg.HealthzBindAddress, "address of /healthz and /readyz (\"\": off)")
	flag.StringVar(&cfg.ReadyFile, "ready-file", cfg.ReadyFile, "file written once the first sync is applied")
	flag.BoolVar(&cfg.Profiling, "profiling", cfg.Profiling, "serve /debug/pprof on the metrics address")
	flag.Func("node-ifaces", "the node's uplinks, comma-separated: NodePorts, ExternalIPs and LoadBalancer IPs are served there (default: the default routes' interfaces; none: no external access)", func(v string) error {
		cfg.NodeInterfaces = strings.Split(v, ",")
		return nil
	})
	flag.StringVar(&cfg.LBAlgorithm, "lb-algorithm", cfg.LBAlgorithm, "how new flows pick a backend unless their Service's netcube.io/lb-algorithm annotation says: random or maglev")
	flag.StringVar(&cfg.NodePortRange, "nodeport-range", cfg.NodePortRange, "NodePort range (lo-hi) that the node's own processes may not bind (socket-LB)")
	flag.IntVar(&cfg.GCPercent, "gc-percent", cfg.GCPercent, "Go GC target percentage (GOGC); the GOGC environment variable wins")
	sizes := map[string]*uint{}
	for m, f := range datapath.MapSizeFlags {
		if _, ok := sizes[f]; !ok {
			sizes[f] = flag.Uint(f, uint(datapath.DefaultMapSizes[m]), "entries of map "+m)
		}
	}
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))

	if *configFile != "" {
		fromFile := agent.Defaults()
		fromFile.NodeName = cfg.NodeName
		if err := agent.LoadFile(*configFile, &fromFile); err != nil {
			fail(err)
		}
		flagged := cfg
		cfg = fromFile
		flag.Visit(func(f *flag.Flag) { applyFlag(&cfg, &flagged, f.Name) })
	}
	if cfg.MapSizes == nil {
		cfg.MapSizes = map[string]uint32{}
	}
	flag.Visit(func(f *flag.Flag) {
		for m, name := range datapath.MapSizeFlags {
			if name == f.Name {
				cfg.MapSizes[m] = uint32(*sizes[name])
			}
		}
	})
	if *cleanup {
		if err := datapath.Unpin(cfg.BPFRoot); err != nil {
			fail(err)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, cfg); err != nil {
		fail(err)
	}
}

// applyFlag copies the field behind flag name from flagged to cfg, so that
// flags on the command line win over the config file.
func applyFlag(cfg, flagged *agent.Config, name string) {
	switch name {
	case "kubeconfig":
		cfg.Kubeconfig = flagged.Kubeconfig
	case "manifests":
		cfg.Manifests = flagged.Manifests
	case "proxy-name":
		cfg.ProxyName = flagged.ProxyName
	case "node-name":
		cfg.NodeName = flagged.NodeName
	case "bpf-root":
		cfg.BPFRoot = flagged.BPFRoot
	case "socket-lb":
		cfg.SocketLB = flagged.SocketLB
	case "cgroup":
		cfg.Cgroup = flagged.Cgroup
	case "pod-iface-prefix":
		cfg.PodIfacePrefix = flagged.PodIfacePrefix
	case "metrics-bind-address":
		cfg.MetricsBindAddress = flagged.MetricsBindAddress
	case "healthz-bind-address":
		cfg.HealthzBindAddress = flagged.HealthzBindAddress
	case "ready-file":
		cfg.ReadyFile = flagged.ReadyFile
	case "profiling":
		cfg.Profiling = flagged.Profiling
	case "node-ifaces":
		cfg.NodeInterfaces = flagged.NodeInterfaces
	case "lb-algorithm":
		cfg.LBAlgorithm = flagged.LBAlgorithm
	case "nodeport-range":
		cfg.NodePortRange = flagged.NodePortRange
	case "gc-percent":
		cfg.GCPercent = flagged.GCPercent
	}
}

func fail(err error) {
	slog.Error("netcube-agent", "err", err)
	os.Exit(1)
}
