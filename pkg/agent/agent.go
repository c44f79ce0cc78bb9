// Package agent wires one node's netcube together: it loads the datapath
// (reusing pinned maps and links), restores the lb cube from the maps,
// attaches the programs to the pods' interfaces and cgroup, and runs a state
// source into the reconciler. It owns no logic of its own beyond that wiring.
package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/lb"
	"github.com/netcube/netcube/pkg/reconcile"
	"github.com/netcube/netcube/pkg/source"
)

// Config is the agent's configuration.
type Config struct {
	PinDir         string            // bpffs directory of this node's maps and links
	MapSizes       map[string]uint32 // per map name; 0 = default
	SocketLB       bool              // attach the socket-level LB programs
	CgroupPath     string            // cgroup v2 of the pods (socket-LB attach point)
	PodIfacePrefix string            // host-side pod veths are named <prefix>*
	ReadyFile      string            // written once the first sync is applied
	Source         source.Source
}

// Run runs the agent until ctx ends. The datapath is left in place on exit.
func Run(ctx context.Context, cfg Config) error {
	if err := datapath.EnsureBPFFS(); err != nil {
		return err
	}
	dp, err := datapath.Load(datapath.Config{PinDir: cfg.PinDir, MapSizes: cfg.MapSizes})
	if err != nil {
		return err
	}
	defer dp.Close()

	cube, err := lb.Restore(dp.Maps())
	if err != nil {
		return fmt.Errorf("restore load-balancer state from %s: %w", cfg.PinDir, err)
	}
	slog.Info("datapath loaded", "pins", cfg.PinDir, "restored_frontends", len(cube.Frontends()))

	if cfg.SocketLB {
		if cfg.CgroupPath == "" {
			return fmt.Errorf("socket-LB needs --cgroup (the pods' parent cgroup)")
		}
		if err := dp.AttachCgroup(cfg.CgroupPath); err != nil {
			return err
		}
	} else if err := dp.DetachCgroup(); err != nil {
		return err
	}
	slog.Info("socket-LB", "enabled", cfg.SocketLB, "cgroup", cfg.CgroupPath)

	rec := reconcile.New(cube)
	errc := make(chan error, 1)
	go func() { errc <- cfg.Source.Run(ctx, rec) }()
	go rec.Run(ctx)
	go watchPods(ctx, dp, cfg.PodIfacePrefix)

	select {
	case <-rec.Synced():
		slog.Info("initial sync applied", "frontends", len(cube.Frontends()), "map_ops", cube.Ops())
		if cfg.ReadyFile != "" {
			if err := os.WriteFile(cfg.ReadyFile, []byte("ready\n"), 0o644); err != nil {
				return err
			}
		}
	case err := <-errc:
		return fmt.Errorf("state source: %w", err)
	case <-ctx.Done():
		return nil
	}
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("state source: %w", err)
		}
		<-ctx.Done()
	case <-ctx.Done():
	}
	slog.Info("agent stopping; the datapath stays in place")
	return nil
}

// watchPods attaches the pod programs to every interface named prefix*,
// as interfaces come and go. (The CNI plugin will tell the agent directly.)
func watchPods(ctx context.Context, dp *datapath.Datapath, prefix string) {
	attached := map[string]int{} // name -> ifindex
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		ifaces, err := net.Interfaces()
		if err != nil {
			slog.Error("list interfaces", "err", err)
		}
		present := map[string]bool{}
		for _, ifc := range ifaces {
			if !strings.HasPrefix(ifc.Name, prefix) {
				continue
			}
			present[ifc.Name] = true
			if attached[ifc.Name] == ifc.Index {
				continue
			}
			if err := dp.AttachPod(ifc.Name, ifc.Index); err != nil {
				slog.Error("attach pod interface", "iface", ifc.Name, "err", err)
				continue
			}
			attached[ifc.Name] = ifc.Index
			slog.Info("pod interface attached", "iface", ifc.Name, "ifindex", ifc.Index)
		}
		for name := range attached {
			if !present[name] {
				delete(attached, name)
			}
		}
		if err := dp.PrunePods(present); err != nil {
			slog.Error("prune pod links", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
