package lb

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/healthcheck"
	"github.com/netcube/netcube/pkg/k8s"
)

// The maps of the load-balancer cube (bpf/cubes/lb/lb_maps.h and
// sock_maps.h). Their names are the object's: the registry test checks
// every one against it.
const (
	MapServices      = "lb_services"       // frontend+slot -> count / backend id
	MapBackends      = "lb_backends"       // backend id -> address
	MapRevNAT        = "lb_revnat"         // revNAT id -> frontend
	MapVIPs          = "lb_vips"           // the ClusterIP addresses (vips.go)
	MapAffinity      = "lb_affinity"       // (datapath) client's last backend
	MapAffinityMatch = "lb_affinity_match" // backends a Service with affinity still has
	MapRetired       = "lb_retired"        // backends removed from every Service while flows may run on them (retired.go)
	MapMaglev        = "lb_maglev"         // Maglev tables by revNAT id
	MapSourceRanges  = "lb_source_ranges"  // loadBalancerSourceRanges
	MapAnnounce      = "lb_announce"       // LoadBalancer IPs answered for on the uplinks (announce.go)
	MapUplinks       = "lb_uplinks"        // the uplinks' MACs, the frames XDP serves are addressed to (announce.go)
	MapSockRevNAT    = "sock_revnat"       // (datapath) socket-LB: backend -> frontend per socket
	MapSockUDP       = "sock_udp_backend"  // (datapath) socket-LB: an unconnected UDP socket's backend
	MapSockSent      = "sock_sent"         // (datapath) socket-LB: what an unconnected UDP socket sent to, with the socket
	// MapNodeConfig: the node's network namespace and NodePort range,
	// which socket-LB keeps from bind() on the node.
	MapNodeConfig        = "node_config"
	MapSockDestroyTarget = "sock_destroy_target" // the backend whose UDP sockets to close
)

// Cube is the load-balancer cube as the registry lists it: Services,
// EndpointSlices and this node in; frontends, backends, Maglev tables and
// source ranges out; socket-LB's UDP sockets closed when their backend
// leaves.
type Cube struct{}

var _ cube.Cube = Cube{}

func (Cube) Name() string { return "lb" }

func (Cube) Maps() []cube.MapSpec {
	return []cube.MapSpec{
		{Name: MapServices, DefaultSize: 262144, SizeFlag: "lb-service-map-size"},
		{Name: MapBackends, DefaultSize: 131072, SizeFlag: "lb-backend-map-size"},
		{Name: MapAffinityMatch, DefaultSize: 131072, SizeFlag: "lb-backend-map-size"},
		{Name: MapRetired, DefaultSize: 131072, SizeFlag: "lb-backend-map-size"}, // a retired backend is in lb_backends
		{Name: MapRevNAT, DefaultSize: 65536, SizeFlag: "lb-revnat-map-size"},
		{Name: MapVIPs, DefaultSize: 65536, SizeFlag: "lb-revnat-map-size"}, // a ClusterIP has a frontend at least
		{Name: MapAffinity, DefaultSize: 65536, SizeFlag: "affinity-map-size"},
		{Name: MapSockRevNAT, DefaultSize: 65536, SizeFlag: "sock-map-size"},
		{Name: MapSockUDP, DefaultSize: 65536, SizeFlag: "sock-map-size"},
		{Name: MapSockSent},
		{Name: MapMaglev},
		{Name: MapSourceRanges},
		{Name: MapAnnounce, DefaultSize: 65536, SizeFlag: "lb-revnat-map-size"}, // an announced address has a frontend at least
		{Name: MapUplinks, Restart: true},                                       // written whole at every start (SetUplinks)
		{Name: MapNodeConfig},
		{Name: MapSockDestroyTarget},
	}
}

// Start rebuilds the cube's view from the maps an earlier agent left, and
// returns the Service reconciler that writes them from now on.
func (Cube) Start(ctx context.Context, env cube.Env) (cube.Started, error) {
	tables, err := Restore(env.Maps)
	if err != nil {
		return cube.Started{}, fmt.Errorf("restore load-balancer state: %w", err)
	}
	slog.Info("load balancer restored", "frontends", tables.FrontendCount())
	uplinks, err := UplinksByName(env.Settings.Uplinks)
	if err != nil {
		return cube.Started{}, err
	}
	if err := tables.SetUplinks(uplinks); err != nil {
		return cube.Started{}, err
	}
	node := env.Node
	if node.Algorithm, err = k8s.ParseAlgorithm(env.Settings.LBAlgorithm); err != nil {
		return cube.Started{}, fmt.Errorf("--lb-algorithm: %w", err)
	}
	if env.Settings.SocketLB {
		prog := env.Program("destroy_udp")
		if prog == nil {
			return cube.Started{}, fmt.Errorf("BPF object: no destroy_udp program")
		}
		tables.OnBackendsLeft(closeLeftUDPSockets(ctx, sockDestroyer{env.Maps, prog}, env.Settings.Cgroup))
		if err := protectNodePorts(env.Maps, env.Settings.NodePortLo, env.Settings.NodePortHi); err != nil {
			return cube.Started{}, err
		}
	}
	// Retired backends go once conntrack's GC has found no flow on them;
	// hollow agents run no GC (nor a datapath).
	if iv := env.Settings.ConntrackGCInterval; iv > 0 && !env.Settings.Hollow {
		if err := tables.EnableRetiring(); err != nil {
			return cube.Started{}, err
		}
		go tables.RunRetired(ctx, iv)
	}
	var rec *Reconciler
	m := newMetrics(tables, env.Maps, func() int { return rec.Pending() })
	rec = NewReconciler(tables, m)
	rec.SetReporter(env.Report)
	rec.SetNode(node)
	st := cube.Started{Reconciler: running{rec, tables}, Metrics: m.collectors(),
		API: map[string]http.Handler{ServicesPath: rec.ownersHandler()}, ServiceNames: serviceNames{rec, env.Maps}}
	if !env.Settings.Hollow { // hollow agents share the machine: none may listen on a health-check port
		health := healthcheck.New()
		health.Mark = uint32(datapath.AgentSocketMark) // may bind in the NodePort range (bpf/cubes/lb/sock_maps.h)
		health.Addrs = node.Addrs                      // where NodePorts are served, not every address of the node
		rec.SetHealthChecks(health)
		st.Stop = health.Close
	}
	return st, nil
}

// protectNodePorts keeps ports lo..hi from bind() by the node's own
// processes (those in this process's network namespace, under the
// socket-LB cgroup); pods are not affected.
func protectNodePorts(maps *cube.Maps, lo, hi uint16) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	cookie, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return fmt.Errorf("this network namespace's cookie: %w", err)
	}
	c := datapath.NodeConfig{NetnsCookie: cookie, NodeportMin: lo, NodeportMax: hi, AgentMark: datapath.AgentSocketMark}
	return cube.Put(maps, MapNodeConfig, uint32(0), c)
}

// running is the cube's reconciler as the agent runs it.
type running struct {
	*Reconciler
	tables *Tables
}

// Summary says, for the log, what the initial sync applied (the sync
// benchmark reads these fields).
func (r running) Summary() []any {
	is := r.InitialSync()
	return []any{"frontends", r.tables.FrontendCount(), "map_ops", r.tables.Ops(),
		"apply_seconds", is.Apply.Seconds(), "first_event_to_applied_seconds", is.Wall.Seconds(),
		"map_write_seconds", r.tables.MapTime().Seconds()}
}
