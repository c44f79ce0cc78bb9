// Command netcube-agent programs one node's eBPF datapath from the desired
// state of Services and EndpointSlices: the Kubernetes API, or a directory
// of YAML.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/netcube/netcube/pkg/agent"
	"github.com/netcube/netcube/pkg/datapath"
)

func main() {
	base := agent.Defaults()
	if host, err := os.Hostname(); err == nil {
		base.NodeName = host
	}
	if n := os.Getenv("NODE_NAME"); n != "" {
		base.NodeName = n
	}
	cfg, cleanup, err := agent.ParseFlags(os.Args[0], os.Args[1:], base)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netcube-agent:", err)
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if cleanup {
		if err := datapath.Unpin(cfg.BPFRoot); err != nil {
			fail(err)
		}
		if err := datapath.DetachPods(cfg.PodIfacePrefix); err != nil {
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

func fail(err error) {
	slog.Error("netcube-agent", "err", err)
	os.Exit(1)
}
