package cube

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// Cube is one registered cube.
type Cube interface {
	// Name is the cube's short name (lb, ct, nat), as in bpf/cubes/<name>.
	Name() string
	// Maps are the maps the cube owns: it alone writes their contents
	// from Go (the datapath may write them too, e.g. conntrack).
	Maps() []MapSpec
	// Start is called once the object is loaded (pinned maps reused),
	// with this cube's maps only.
	Start(ctx context.Context, env Env) (Started, error)
}

// MapSpec declares a map a cube owns. The map itself (type, key, value,
// pinning) is defined once, in the cube's bpf/cubes/<name>/<name>_maps.h.
type MapSpec struct {
	Name string
	// DefaultSize is the number of entries when the agent's flags do not
	// say; 0 keeps the size the object declares (fixed-size maps).
	DefaultSize uint32
	// SizeFlag is the agent flag that sizes the map ("": not sizable).
	// Maps of one flag are sized together.
	SizeFlag string
	// Upgrade, if set, carries the map's entries over when the pinned
	// map (an earlier agent's) has another size or value layout: it turns
	// an old value (its length tells the layout) into the current one,
	// false if it cannot. Without it, such a pin stops the agent.
	Upgrade func(old []byte) (current []byte, ok bool)
	// Restart, for a map without Upgrade, says it holds only what the
	// datapath counts again (counters, per-packet scratch) or the agent
	// writes at every start: a pinned map of another size or value
	// layout (a reason, a cube or a field added) is replaced by a new,
	// empty one instead of stopping the agent. Its counters start again,
	// which Prometheus reads as a counter reset.
	Restart bool
}

// Env is what a cube is given at Start.
type Env struct {
	// Maps are the cube's own maps, as loaded (and pinned).
	Maps *Maps
	// Program returns a program of the object by its function name, for
	// cubes that run one themselves (an iterator); nil if absent.
	Program func(name string) *ebpf.Program
	// Node is this node: name, zone, the addresses it serves NodePorts on.
	Node model.Node
	// Settings are the agent's settings that cubes read.
	Settings Settings
	// Report is where objects that cannot be programmed as written are
	// reported (logged, counted, and Events in API mode).
	Report *report.Reporter
	// Names names pods and Services by the datapath's numbers, asking
	// every started cube's namers (Started.PodNames, ServiceNames).
	Names *Names
}

// Settings are the agent's settings that cubes read.
type Settings struct {
	// SocketLB: the socket hooks translate pods' connections (Cgroup is
	// the pods' cgroup v2 directory).
	SocketLB bool
	Cgroup   string
	// LBAlgorithm is the default backend selection (random, maglev).
	LBAlgorithm string
	// NodePortLo..Hi is the NodePort range, kept from bind() on the node.
	NodePortLo, NodePortHi uint16
	// Routing is how pods reach other nodes' pods: "native" (the
	// underlay routes pod CIDRs) or "vxlan" (an overlay).
	Routing string
	// PodIfacePrefix starts the names of pods' host-side veths.
	PodIfacePrefix string
	// Uplinks are the node's uplinks (interface names).
	Uplinks []string
	// UplinkRate caps the uplinks' sending while slices queue them, in
	// bits per second (0: each uplink's speed).
	UplinkRate uint64
	// UplinkMTU is the smallest MTU of the node's uplinks (0: unknown).
	UplinkMTU int
	// Masquerade: pods' traffic to outside the cluster (every node's pod
	// CIDRs and addresses, and NoMasquerade) leaves with this node's
	// address.
	Masquerade   bool
	NoMasquerade []netip.Prefix
	// ConntrackGCInterval: how often conntrack's timed-out entries are
	// removed (0: never, tests).
	ConntrackGCInterval time.Duration
	// MonitorDrops, MonitorPolicy, MonitorTrace: what the datapath
	// reports as events (package monitor): each dropped packet, each
	// connection a policy allowed, each flow a cube translated.
	MonitorDrops, MonitorPolicy, MonitorTrace bool
	// MonitorCubes: whether each cube's packets and bytes are counted.
	MonitorCubes bool
	// HubbleSocket is where the Hubble Observer API serves the events
	// ("": not served).
	HubbleSocket string
	// HubbleMetrics are the Hubble metrics counted of the events
	// (package hubble/metrics; none: not counted).
	HubbleMetrics []string
	// HubbleListenAddress, HubbleTLSCertFile, HubbleTLSKeyFile,
	// HubbleTLSClientCAFiles, HubbleDisableTLS: the Hubble server's TCP
	// listener (hubble.TCP), which hubble-relay reads; ClusterName names
	// the cluster in the peers' TLS server names.
	HubbleListenAddress                 string
	HubbleTLSCertFile, HubbleTLSKeyFile string
	HubbleTLSClientCAFiles              []string
	HubbleDisableTLS                    bool
	ClusterName                         string
	// Hollow: the maps are in memory (--datapath=memory, one of many
	// agents on a machine measuring the control plane): a cube writes
	// them as ever, and changes nothing on the host (devices, routes,
	// qdiscs, listening ports) and runs no program.
	Hollow bool
}

// Started is what the agent runs for a cube.
type Started struct {
	// Reconciler, if set, receives the state source's changes. Only one
	// cube reconciles Services today; the agent refuses two.
	Reconciler Reconciler
	// Metrics are registered on the agent's /metrics.
	Metrics []prometheus.Collector
	// Stop, if set, is called when the agent stops.
	Stop func()
	// Nodes, if set, receives every Node object (this node's and the
	// others').
	Nodes NodeHandler
	// Pods, if set, is told of each pod the CNI plugin wires or unwires,
	// by its host-side veth.
	Pods PodHandler
	// Policy, if set, is given every pod, namespace and NetworkPolicy of
	// the cluster (one cube at most).
	Policy source.PolicyHandler
	// Slices, if set, is given every NetworkSlice, pod and namespace of
	// the cluster (one cube at most).
	Slices SliceHandler
	// Interfaces are devices the cube made whose traffic runs through
	// programs of the object; the agent attaches and pins them.
	Interfaces []Interface
	// API are paths the cube serves on the agent's local API (a unix
	// socket, for the netcube CLI).
	API map[string]http.Handler
	// PodNames, ServiceNames, PolicyNames, if set, name what the cube
	// knows (Env.Names).
	PodNames     PodNamer
	ServiceNames ServiceNamer
	PolicyNames  PolicyNamer
}

// NodeHandler receives Node objects.
type NodeHandler interface {
	// OnNode delivers a node as its Node object describes it (nil:
	// deleted).
	OnNode(name string, node *model.NodeInfo)
	// OnNodesSynced: every node existing at start has been delivered;
	// what the cube holds for other nodes may now be removed.
	OnNodesSynced()
}

// PodHandler is told of pods by their host-side veth.
type PodHandler interface {
	PodUp(hostIf string) error
	PodDown(hostIf string) error
}

// Interface is a device and the object's programs for its tcx hooks
// (program names; "": none).
type Interface struct {
	Name            string
	Ingress, Egress string
}

// SliceHandler receives the NetworkSlices and the pods and namespaces
// they select from.
type SliceHandler interface {
	source.SliceHandler
	OnPod(key types.NamespacedName, pod *model.Pod)
	OnNamespace(name string, ns *model.Namespace)
	// OnPodsSynced: every pod and namespace listed has been delivered.
	OnPodsSynced()
}

// Reconciler applies model state (Services, EndpointSlices, this Node) to
// a cube's maps.
type Reconciler interface {
	source.Handler
	// Run applies queued changes until ctx ends.
	Run(ctx context.Context)
	// Synced is closed once the source's initial state is applied.
	Synced() <-chan struct{}
	// Failures lists the objects whose last apply failed (retried), for
	// /readyz.
	Failures() map[string]error
	// Summary says, for the log, what the initial sync applied.
	Summary() []any
}

// Every calls f every interval until ctx ends: a cube's periodic work
// (conntrack's GC, the load balancer's retired backends), in a goroutine
// of the cube's Start.
func Every(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
