// Command netcube-agent programs one node's eBPF datapath from the desired
// state of Services and EndpointSlices.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/netcube/netcube/pkg/agent"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/source/yamldir"
)

func main() {
	var (
		cfg       agent.Config
		manifests string
		cleanup   bool
	)
	flag.StringVar(&cfg.PinDir, "bpf-root", "/sys/fs/bpf/netcube", "bpffs directory for this node's pinned maps and links")
	flag.StringVar(&manifests, "manifests", "", "directory of Service and EndpointSlice YAML to program (watched for changes)")
	flag.BoolVar(&cfg.SocketLB, "socket-lb", true, "translate pod->Service at connect time (cgroup hooks); off: per-packet tc path only")
	flag.StringVar(&cfg.CgroupPath, "cgroup", "", "cgroup v2 directory holding the pods (socket-LB attaches here, never to the root cgroup)")
	flag.StringVar(&cfg.PodIfacePrefix, "pod-iface-prefix", "ncp", "host-side pod veths are named <prefix>*")
	flag.StringVar(&cfg.ReadyFile, "ready-file", "", "file written once the first sync is applied")
	flag.BoolVar(&cleanup, "cleanup", false, "remove everything pinned under --bpf-root (detaches the datapath, drops flow state) and exit")
	sizes := map[string]*uint{}
	for m, f := range datapath.MapSizeFlags {
		if _, ok := sizes[f]; !ok {
			sizes[f] = flag.Uint(f, uint(datapath.DefaultMapSizes[m]), "entries of map "+m)
		}
	}
	flag.Parse()

	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if cleanup {
		if err := datapath.Unpin(cfg.PinDir); err != nil {
			fail(err)
		}
		return
	}
	if manifests == "" {
		fail(fmt.Errorf("--manifests is required (the Kubernetes API source comes next)"))
	}
	cfg.MapSizes = map[string]uint32{}
	for m, f := range datapath.MapSizeFlags {
		cfg.MapSizes[m] = uint32(*sizes[f])
	}
	cfg.Source = &yamldir.Source{Dir: manifests}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := agent.Run(ctx, cfg); err != nil {
		fail(err)
	}
}

func fail(err error) {
	slog.Error("netcube-agent", "err", err)
	os.Exit(1)
}
