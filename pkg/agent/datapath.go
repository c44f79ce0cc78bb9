package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/memmaps"
	"github.com/netcube/netcube/pkg/cubes"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
)

// The datapaths an agent runs (--datapath).
const (
	// DatapathKernel: the BPF object in the kernel, attached to the node.
	DatapathKernel = "kernel"
	// DatapathMemory: the cubes' maps in memory and nothing attached: a
	// hollow agent, one of many on a machine measuring the control plane
	// (netcube-lab bench scale) with the real sources, reconcilers and
	// policy compiler. It needs no root and changes nothing on the host.
	DatapathMemory = "memory"
)

// nodeDatapath is what the agent asks of a datapath once loaded.
type nodeDatapath interface {
	// MapsOf is the cube's own maps.
	MapsOf(c cube.Cube) *cube.Maps
	// Program is the object's program of that name (nil: none).
	Program(name string) *ebpf.Program
	// AttachInterface attaches programs to a device a cube made.
	AttachInterface(ifname string, ifindex int, ingress, egress string) error
}

// checkDatapath refuses what a datapath cannot do: a hollow agent touches
// nothing on the host, so it cannot translate at connect time nor wire
// pods.
func checkDatapath(cfg Config) error {
	switch cfg.Datapath {
	case "", DatapathKernel:
		return nil
	case DatapathMemory:
	default:
		return fmt.Errorf("--datapath (datapath) %q: want %s or %s", cfg.Datapath, DatapathKernel, DatapathMemory)
	}
	var errs []error
	if cfg.SocketLB {
		errs = append(errs, errors.New("--datapath=memory with --socket-lb: a hollow agent attaches no socket hooks; give --socket-lb=false"))
	}
	for _, f := range []struct{ flag, value string }{{"cni-socket", cfg.CNISocket}, {"cni-conf-dir", cfg.CNIConfDir}, {"cni-bin-dir", cfg.CNIBinDir}} {
		if f.value != "" {
			errs = append(errs, fmt.Errorf("--datapath=memory with --%s %q: a hollow agent wires no pods; give --%s=", f.flag, f.value, f.flag))
		}
	}
	if a := cfg.NodePortAcceleration; a != "" && a != "none" {
		errs = append(errs, fmt.Errorf("--datapath=memory with --nodeport-acceleration %q: a hollow agent attaches no XDP program; give --nodeport-acceleration=none", a))
	}
	if ifs := cfg.NodeInterfaces; len(ifs) > 0 && !slices.Equal(ifs, []string{"none"}) {
		errs = append(errs, fmt.Errorf("--datapath=memory with --node-ifaces %q: a hollow agent serves no uplinks; give --node-ifaces=none", strings.Join(ifs, ",")))
	}
	return errors.Join(errs...)
}

// loadKernelDatapath loads the BPF object (reusing the pins under
// cfg.BPFRoot) and attaches or detaches the socket hooks.
func loadKernelDatapath(cfg Config) (*datapath.Datapath, error) {
	if err := datapath.CheckKernel(); err != nil {
		return nil, err
	}
	if err := datapath.EnsureBPFFS(); err != nil {
		return nil, err
	}
	vars, err := cfg.Conntrack.Variables()
	if err != nil {
		return nil, err
	}
	npVars, err := lb.NodePortVariables(cfg.NodePortMode, cfg.Routing)
	if err != nil {
		return nil, err
	}
	maps.Copy(vars, npVars)
	start := time.Now()
	dp, err := datapath.Load(datapath.Config{PinDir: cfg.BPFRoot, Cubes: cubes.All, MapSizes: cfg.MapSizes, Variables: vars})
	if err != nil {
		return nil, err
	}
	slog.Info("datapath loaded", "pins", cfg.BPFRoot, "seconds", time.Since(start).Seconds())
	if cfg.SocketLB {
		if cfg.Cgroup == "" {
			dp.Close()
			return nil, errors.New("socket-LB needs --cgroup (the pods' parent cgroup v2)")
		}
		err = dp.AttachCgroup(cfg.Cgroup)
	} else {
		err = dp.DetachCgroup()
	}
	if err != nil {
		dp.Close()
		return nil, err
	}
	slog.Info("socket-LB", "enabled", cfg.SocketLB, "cgroup", cfg.Cgroup)
	return dp, nil
}

// memoryDatapath is a hollow agent's: the cubes' maps in memory (package
// memmaps), sized as the kernel's would be, each cube given its own.
type memoryDatapath struct {
	set *memmaps.Set
}

func newMemoryDatapath(cfg Config) (*memoryDatapath, error) {
	// One set for every cube: the BPF object's spec is read once (a
	// hundred hollow agents starting together each read it).
	set, err := memmaps.New(cfg.MapSizes, cubes.All...)
	if err != nil {
		return nil, err
	}
	return &memoryDatapath{set: set}, nil
}

func (d *memoryDatapath) MapsOf(c cube.Cube) *cube.Maps { return d.set.Of(c) }

func (*memoryDatapath) Program(string) *ebpf.Program { return nil }

func (*memoryDatapath) AttachInterface(ifname string, _ int, _, _ string) error {
	return fmt.Errorf("a hollow agent attaches nothing (a cube asked for %s)", ifname)
}
