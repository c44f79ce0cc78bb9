package router

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// The router cube's maps (bpf/cubes/router/router_maps.h).
const (
	MapEndpoints   = "router_endpoints"
	MapSources     = "router_sources"      // the addresses each pod may send from
	MapSourceSlots = "router_source_slots" // router_sources' fast path, by device
	MapNodeMACs    = "router_node_macs"    // the other nodes' MACs (DSR senders)
	MapNodes       = "router_nodes"
	MapConfig      = "router_config"
)

// Routing modes (cube.Settings.Routing).
const (
	Native = "native"
	VXLAN  = "vxlan"
	// Kernel: native routes, but the kernel forwards every packet that is
	// not a Service's (no redirect into pods, no FIB redirect): the
	// stack-routed path, the pod-network benchmark's second reference.
	Kernel = "kernel"
)

// Cube is the router cube as the registry lists it.
type Cube struct{}

var _ cube.Cube = Cube{}

func (Cube) Name() string { return "router" }

func (Cube) Maps() []cube.MapSpec {
	return []cube.MapSpec{
		{Name: MapEndpoints, DefaultSize: 4096, SizeFlag: "router-endpoints-max"},
		{Name: MapSources, DefaultSize: 4096, SizeFlag: "router-sources-max"},
		{Name: MapSourceSlots}, // its size is the BPF's (ROUTER_SOURCE_SLOTS: a slot is ifindex % size)
		{Name: MapNodeMACs, DefaultSize: 4096, SizeFlag: "router-node-macs-max"},
		{Name: MapNodes, DefaultSize: 16384, SizeFlag: "router-nodes-max"},
		{Name: MapConfig},
	}
}

// Start sets the routing mode up (creating or removing the overlay
// device), writes this node's pods, and returns the handlers of Nodes and
// pods.
func (Cube) Start(ctx context.Context, env cube.Env) (cube.Started, error) {
	mode := env.Settings.Routing
	if mode == "" {
		mode = Native
	}
	conf := datapath.RouterConf{Mode: datapath.RouterNative}
	var st cube.Started
	overlay := 0
	// A hollow agent (maps in memory) makes and removes no device.
	hollow := env.Settings.Hollow
	switch mode {
	case Native, Kernel:
		if !hollow {
			if err := removeOverlay(); err != nil {
				return st, err
			}
		}
		if mode == Kernel {
			conf.Mode = datapath.RouterKernel
		}
	case VXLAN:
		conf = datapath.RouterConf{Mode: datapath.RouterVXLAN, Vni: VNI}
		if !hollow {
			dev, err := ensureOverlay(env.Settings.UplinkMTU)
			if err != nil {
				return st, err
			}
			overlay = dev.Attrs().Index
			conf.VxlanIfindex = uint32(overlay)
			copy(conf.VxlanMac[:], dev.Attrs().HardwareAddr)
			st.Interfaces = []cube.Interface{{Name: OverlayDevice, Ingress: "from_overlay", Egress: "to_overlay"}}
		}
	default:
		return st, fmt.Errorf("--routing %q: want %s, %s or %s", mode, Native, VXLAN, Kernel)
	}
	if err := cube.Put(env.Maps, MapConfig, uint32(0), conf); err != nil {
		return st, err
	}
	// A hollow node has no pod devices to read, and its routes to the
	// other nodes' pods stay in memory.
	eps := &endpoints{maps: env.Maps, prefix: env.Settings.PodIfacePrefix, none: mode == Kernel, hollow: hollow}
	if err := eps.syncAll(); err != nil {
		return st, err
	}
	st.Pods = eps
	var table routeTable = kernelRoutes{}
	if hollow {
		table = &memoryRoutes{}
	}
	nodes := newNodes(env, mode, overlay, table)
	if !hollow {
		nodes.macs = newNodeMACs(env.Maps)
		go nodes.macs.run(ctx)
	}
	st.Nodes = nodes
	slog.Info("router", "mode", mode, "overlay_ifindex", overlay)
	return st, nil
}
