package agent

import (
	"fmt"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/pkg/cni"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/hubble"
	hubblemetrics "github.com/netcube/netcube/pkg/hubble/metrics"
	"github.com/netcube/netcube/pkg/l2announce"
	"github.com/netcube/netcube/pkg/source/kube"
)

// Config is the agent's configuration: flags, or a file of the same fields
// (`--config`, in the spirit of KubeProxyConfiguration); flags given on the
// command line override the file.
type Config struct {
	// Where the desired state comes from: a kubeconfig (or in-cluster
	// config when empty and running in a Pod), or a directory of YAML.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// APICompression asks the API server for gzip-compressed lists. Off by
	// default: compressing a list costs the API server CPU time for each
	// agent that lists, and saves only bandwidth, which a cluster's own
	// network has (sig-scalability's finding, kubernetes#112296). A
	// kubeconfig's disable-compression is overridden by this.
	APICompression bool `json:"apiCompression,omitempty"`
	// APIContentType is the encoding asked of the API server: protobuf
	// (the default: a third of JSON's size, decoded with less garbage) or
	// json (to compare; netcube's own CRDs are always JSON).
	APIContentType string `json:"apiContentType,omitempty"`
	// APIWatchList lists each resource as a watch that begins with every
	// object (the API server's WatchList streaming, KEP-3157) instead of
	// paged lists then a watch; an API server without it is listed.
	APIWatchList bool `json:"apiWatchList,omitempty"`
	// APIListPageSize is the objects per list request (0: the source's
	// default). kube-apiserver serves a page from its watch cache by
	// walking every object after the page's start, the rest of the list
	// included, so a list of N objects in pages of P costs it about
	// N*N/(2P): fewer, larger pages cost it less, and the agent reads each
	// page as it arrives, one item at a time, so a larger page costs it
	// no more memory.
	APIListPageSize int64 `json:"apiListPageSize,omitempty"`
	// PodSource is where NetworkPolicy's pods come from: "pods" (every Pod
	// object of the cluster, the default) or "nodepods" (this node's Pod
	// objects, and each other node's NodePods, which its agent writes:
	// a pod's status changes then reach its own node's agent alone).
	PodSource string `json:"podSource,omitempty"`
	Manifests string `json:"manifests,omitempty"`
	// ProxyName: handle only Services labelled
	// service.kubernetes.io/service-proxy-name=<it>; "" = unlabelled ones.
	ProxyName string `json:"proxyName,omitempty"`
	NodeName  string `json:"nodeName,omitempty"`

	// Datapath: "kernel" (the BPF object, attached to the node) or
	// "memory" (a hollow agent: the maps in memory, nothing attached, no
	// root needed; to measure the control plane with many agents on one
	// machine).
	Datapath       string            `json:"datapath,omitempty"`
	BPFRoot        string            `json:"bpfRoot,omitempty"`  // bpffs directory of this node's pins
	MapSizes       map[string]uint32 `json:"mapSizes,omitempty"` // by map name; 0 = default
	SocketLB       bool              `json:"socketLB"`
	Cgroup         string            `json:"cgroup,omitempty"` // pods' cgroup v2 (socket-LB)
	PodIfacePrefix string            `json:"podIfacePrefix,omitempty"`
	// NodeInterfaces are the node's uplinks: traffic from outside the
	// cluster (NodePort, ExternalIPs, LoadBalancer IPs) is served there,
	// and NodePorts on their addresses. Empty: the default routes'.
	NodeInterfaces []string `json:"nodeInterfaces,omitempty"`
	// NodePortAcceleration is where the uplinks serve Services reached
	// from outside (NodePort, ExternalIPs, LoadBalancer IPs): "none", the
	// tc program alone; "xdp", an XDP program before it (native where the
	// driver runs it, else generic) that forwards flows to backends on
	// other nodes and drops what loadBalancerSourceRanges walls off,
	// passing everything else to tc.
	NodePortAcceleration string `json:"nodePortAcceleration,omitempty"`
	// NodePortMode is how a flow from outside reaches a backend on
	// another node: "snat" (to the node it came in on, whose address the
	// backend sees; replies come back through it), "dsr" (direct server
	// return: the frontend travels in the packet, an IPv4 option or IPv6
	// destination option, the backend sees the client and its node
	// answers the client itself), or "hybrid" (DSR for TCP, SNAT for
	// UDP). DSR needs routing native or kernel, and an underlay that lets
	// a node send from another node's address (the frontend's).
	NodePortMode string `json:"nodePortMode,omitempty"`
	// LBAlgorithm is how new flows pick a backend unless their Service's
	// netcube.io/lb-algorithm annotation says: random or maglev.
	LBAlgorithm string `json:"lbAlgorithm,omitempty"`
	// NodePortRange ("30000-32767", the API server's default) is kept from
	// bind() on the node when socket-LB is on, so no local process can hold
	// a port a NodePort Service needs.
	NodePortRange string `json:"nodePortRange,omitempty"`
	// UplinkRate caps what the uplinks send while network slices queue
	// them, in bits per second ("900M"; "": each uplink's speed, 10G for
	// a link without one, as a veth). Set it a little under the real
	// bottleneck (a cloud VM's bandwidth cap) so that the queue forms in
	// netcube's classes, where the latency class goes first, and not in
	// a device or network queue that knows no classes.
	UplinkRate string `json:"uplinkRate,omitempty"`
	// LoadBalancerIPs: netcube-operator gives LoadBalancer Services their
	// IPs from the NetworkLoadBalancerPools (package lbipam), and the
	// agent serves an ingress address of a Service of netcube's class (or
	// none) only if it lies in a pool. False: another controller (MetalLB,
	// a cloud's) assigns them, and every ingress address is served.
	LoadBalancerIPs bool `json:"loadBalancerIPs"`
	// L2Announce is who answers ARP and NDP for a LoadBalancer IP on the
	// uplinks: "elected" (one node per address, elected from heartbeats
	// between the agents, which tells the link with gratuitous ARP and
	// unsolicited NA when it takes an address over) or "all" (every
	// eligible node: every node for Cluster, those with a local endpoint
	// for Local).
	L2Announce string `json:"l2Announce,omitempty"`
	// L2HeartbeatPort is the UDP port of the agents' heartbeats (on the
	// node's uplink addresses; 0: none, every eligible node announces).
	L2HeartbeatPort int `json:"l2HeartbeatPort"`
	// L2HeartbeatInterval is how often an agent sends its heartbeat to
	// every other node; a node is dead after 3 intervals without one.
	L2HeartbeatInterval metav1.Duration `json:"l2HeartbeatInterval"`
	// L2HeartbeatAddrs: the loopback addresses a hollow agent
	// (--datapath=memory) binds its heartbeats to, its Node object's
	// InternalIPs (hollow agents share one machine, so each needs an
	// address of its own; a node's agent uses its uplinks' addresses).
	// Empty: a hollow agent runs no election.
	L2HeartbeatAddrs []string `json:"l2HeartbeatAddrs,omitempty"`

	// The pod network. CNISocket: where the CNI plugin tells the agent
	// of each pod ("": not served). CNIConfDir: where the agent installs
	// the conflist for this node's pod CIDRs ("": not installed);
	// CNIBinDir: where it copies the plugin ("": not copied). IPAMDir:
	// where the plugin keeps the address allocations. MTU: the pods'
	// (0: the plugin's default).
	// Routing: how pods reach other nodes' pods, "native" (the underlay
	// routes pod CIDRs; the agent installs a route per node) or "vxlan".
	Routing string `json:"routing,omitempty"`
	// Masquerade: pods' traffic to outside the cluster (every node's pod
	// CIDRs and addresses, and NoMasquerade) leaves with the node's
	// address.
	Masquerade   bool     `json:"masquerade"`
	NoMasquerade []string `json:"noMasquerade,omitempty"`
	CNISocket    string   `json:"cniSocket,omitempty"`
	CNIConfDir   string   `json:"cniConfDir,omitempty"`
	CNIBinDir    string   `json:"cniBinDir,omitempty"`
	// HostPortPlugin is the CNI plugin chained after netcube's for pods'
	// hostPorts ("portmap", the standard plugin, which the runtime's CNI
	// bin directory must hold; "": hostPorts are not served). Chained
	// only when found there: a conflist naming a missing plugin would
	// fail every pod.
	HostPortPlugin string `json:"hostPortPlugin,omitempty"`
	IPAMDir        string `json:"ipamDir,omitempty"`
	MTU            int    `json:"mtu,omitempty"`
	// PodDevice is the device pair pods get: "veth", or "netkit" (Linux
	// 6.7+; netcube's programs are the pair's own, so a pod's packets
	// enter the datapath as the pod transmits, without a veth's backlog
	// pass). Pods keep the device they were given.
	PodDevice string `json:"podDevice,omitempty"`

	// APISocket is the agent's local API (a unix socket) for the netcube
	// CLI: the datapath's events (netcube monitor); "" = off.
	APISocket string `json:"apiSocket,omitempty"`
	// HubbleSocket is where the agent serves Hubble's Observer API (the
	// hubble CLI: hubble observe --server unix://<it>); "" = off.
	HubbleSocket string `json:"hubbleSocket,omitempty"`
	// HubbleMetrics are the Hubble metrics served on /metrics, by
	// Cilium's names (flow, drop, tcp, policy, port-distribution: package
	// hubble/metrics); empty = none.
	HubbleMetrics []string `json:"hubbleMetrics"`
	// Hubble is the Hubble server's TCP listener, for hubble-relay.
	Hubble HubbleConfig `json:"hubble,omitempty"`
	// ClusterName names the cluster in the TLS server names the Hubble
	// Peer service tells (<node>.<cluster>.hubble-grpc.cilium.io).
	ClusterName string `json:"clusterName,omitempty"`
	// Monitor is what the datapath reports as events (drops are counted
	// whatever it says).
	Monitor MonitorConfig `json:"monitor,omitempty"`

	MetricsBindAddress string `json:"metricsBindAddress,omitempty"` // /metrics; "" = off
	HealthzBindAddress string `json:"healthzBindAddress,omitempty"` // /healthz, /readyz; "" = off
	ReadyFile          string `json:"readyFile,omitempty"`
	// APIUnreachableGrace: how long the API server may be unreachable
	// before /readyz says so. The datapath keeps its last state all the
	// while, and every change made meanwhile is applied when it answers.
	APIUnreachableGrace metav1.Duration `json:"apiUnreachableGrace,omitempty"`
	Profiling           bool            `json:"profiling,omitempty"` // /debug/pprof on the metrics address

	// GCPercent is the Go garbage collector's GOGC for the agent (the GOGC
	// environment variable, when set, wins). Nearly all of the agent's heap
	// is long-lived state (the cluster view, the datapath index) and it
	// allocates little once synced, so Go's default of 100, which lets the
	// heap grow to twice the live state before collecting, buys nothing
	// but memory: 50 keeps the heap within 1.5 times the state.
	GCPercent int `json:"gcPercent,omitempty"`

	// Conntrack: the timeouts of translated flows and how often timed-out
	// entries are removed.
	Conntrack ct.Config `json:"conntrack,omitempty"`
}

// HubbleConfig is the Hubble server's TCP listener (Cilium's agent flags
// of the same names): mutual TLS, or plain TCP only with DisableTLS. The
// default ListenAddress takes effect only once certificates are given
// (or DisableTLS): an agent without either serves the unix socket alone;
// any other address without them is an error.
type HubbleConfig struct {
	ListenAddress    string   `json:"listenAddress,omitempty"`
	TLSCertFile      string   `json:"tlsCertFile,omitempty"`
	TLSKeyFile       string   `json:"tlsKeyFile,omitempty"`
	TLSClientCAFiles []string `json:"tlsClientCAFiles,omitempty"`
	DisableTLS       bool     `json:"disableTLS,omitempty"`
}

// MonitorConfig is what the datapath reports as events: each dropped
// packet, each connection a NetworkPolicy allowed, and (trace) the first
// packet of each flow a cube translated; and whether each cube's packets
// and bytes are counted.
type MonitorConfig struct {
	Drops  bool `json:"drops"`
	Policy bool `json:"policy"`
	Trace  bool `json:"trace"`
	Cubes  bool `json:"cubes"`
}

// DefaultAPISocket is where the agent serves its local API;
// DefaultHubbleSocket, the Hubble Observer API.
const (
	DefaultAPISocket    = "/run/netcube/agent.sock"
	DefaultHubbleSocket = "/run/netcube/hubble.sock"
)

// The encodings asked of the API server (--api-content-type).
const (
	APIProtobuf = "protobuf"
	APIJSON     = "json"
)

// Defaults are kube-proxy's ports for metrics and health.
func Defaults() Config {
	return Config{
		Datapath:             DatapathKernel,
		BPFRoot:              "/sys/fs/bpf/netcube",
		SocketLB:             true,
		PodIfacePrefix:       cni.HostIfPrefix,
		CNISocket:            cni.DefaultAgentSocket,
		APISocket:            DefaultAPISocket,
		HubbleSocket:         DefaultHubbleSocket,
		HubbleMetrics:        slices.Clone(hubblemetrics.Default),
		Hubble:               HubbleConfig{ListenAddress: hubble.DefaultListenAddress},
		ClusterName:          hubble.DefaultClusterName,
		APIContentType:       APIProtobuf,
		PodSource:            kube.PodsFromAPI,
		Monitor:              MonitorConfig{Drops: true, Policy: true, Cubes: true},
		Routing:              "native",
		Masquerade:           true,
		LoadBalancerIPs:      true,
		L2Announce:           L2AnnounceElected,
		L2HeartbeatPort:      l2announce.DefaultPort,
		L2HeartbeatInterval:  metav1.Duration{Duration: l2announce.DefaultInterval},
		IPAMDir:              cni.DefaultDataDir,
		PodDevice:            cni.PodDeviceVeth,
		MetricsBindAddress:   "127.0.0.1:10249",
		HealthzBindAddress:   "0.0.0.0:10256",
		GCPercent:            50,
		APIUnreachableGrace:  metav1.Duration{Duration: 30 * time.Second},
		LBAlgorithm:          "random",
		NodePortAcceleration: "none",
		NodePortMode:         "snat",
		NodePortRange:        "30000-32767",
		Conntrack:            ct.Defaults(),
	}
}

// LoadFile reads a config file over cfg; unknown fields are errors.
func LoadFile(path string, cfg *Config) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, cfg); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// ParsePortRange reads "lo-hi".
func ParsePortRange(s string) (lo, hi uint16, err error) {
	var a, b int
	if _, err := fmt.Sscanf(s, "%d-%d", &a, &b); err != nil || a < 1 || b > 65535 || a > b {
		return 0, 0, fmt.Errorf("port range %q: want lo-hi within 1-65535", s)
	}
	return uint16(a), uint16(b), nil
}

// tcp is the listener c asks for.
func (c HubbleConfig) tcp() hubble.TCP {
	return hubble.TCP{Address: c.ListenAddress, CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, ClientCAFiles: c.TLSClientCAFiles, DisableTLS: c.DisableTLS}
}
