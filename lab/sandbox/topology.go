package sandbox

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/netcube/netcube/pkg/cni"
)

// LabBinary is the lab's CLI (lab/cmd/netcube-lab): every sandbox pod
// runs its traffic tools (netcube-lab pod serve|request|load|hold) from
// Config.BinDir.
const LabBinary = "netcube-lab"

// Config describes a sandbox.
type Config struct {
	Name        string // prefix of everything created; default "nc"
	Nodes       int    // default 2
	PodsPerNode int    // default 2
	SocketLB    bool   // the agents' --socket-lb
	BinDir      string // directory holding netcube-lab, netcube-agent and the CNI plugin
	// Manifests, if set, is copied into the agents' manifest directory
	// instead of the built-in example Services.
	Manifests string
	// APIServer runs a real kube-apiserver and etcd in the sandbox; the
	// agents watch it instead of a manifest directory.
	APIServer bool
	// ServiceCIDRs is the API server's ClusterIP ranges (default
	// "10.96.0.0/16,fd00:10:96::/112"; the benchmark needs more).
	ServiceCIDRs string `json:",omitempty"`
	// Routing is the agents' --routing: native (default), vxlan or
	// kernel.
	Routing string `json:",omitempty"`
	// PodNetwork is "" (netcube: its CNI plugin and agents) or
	// "flannel": the pod-network benchmark's reference, flanneld with
	// the bridge and host-local plugins from FlannelDir
	// (hack/build-flannel.sh), no netcube agent; it needs APIServer.
	PodNetwork string `json:",omitempty"`
	FlannelDir string `json:",omitempty"`
	// NodePortAcceleration is the agents' --nodeport-acceleration: none
	// (the default) or xdp.
	NodePortAcceleration string `json:",omitempty"`
	// NodePortMode is the agents' --nodeport-mode: snat (the default),
	// dsr or hybrid.
	NodePortMode string `json:",omitempty"`
	// XDPUnderlay readies the underlay for XDP (xdpWire), as
	// NodePortAcceleration xdp does: for a benchmark that compares with
	// and without XDP on the same wire.
	XDPUnderlay bool `json:",omitempty"`
	// AgentArgs are extra flags for every agent (map sizes, say).
	AgentArgs []string `json:",omitempty"`
	// Kubelet makes the nodes real (kubelet.go): containerd and a kubelet
	// on each, kube-controller-manager and kube-scheduler beside the API
	// server (implied), and netcube installed by its Helm chart (Chart)
	// as a DaemonSet, not started by hand. The sandbox makes no pods of
	// its own: kubelet starts what is created through the API. E2EDir
	// holds kubelet, kube-scheduler, agnhost and e2e.test
	// (hack/build-e2e.sh); ToolsDir kube-apiserver, etcd,
	// kube-controller-manager and helm (hack/build-tools.sh).
	Kubelet bool `json:",omitempty"`
	// KeepOnFailure leaves a sandbox that failed to come up as it is, to
	// inspect its logs (down removes it).
	KeepOnFailure bool   `json:"-"`
	E2EDir        string `json:",omitempty"`
	ToolsDir      string `json:",omitempty"`
	Chart         string `json:",omitempty"`
	// Routed puts the nodes in racks (routed.go): each rack its own L2
	// segment and subnets behind a router running BIRD, which the nodes
	// peer with over BGP (a NetworkBGPPeering per rack). Only with the
	// manifest directory (not APIServer, not Kubelet).
	Routed bool `json:",omitempty"`
	// Racks is the number of racks when Routed (default 2).
	Racks int `json:",omitempty"`
	// BGPHoldTime is the sessions' hold time when Routed (default 9 s,
	// keepalives a third of it): how long a router keeps routing to a
	// node that went silent.
	BGPHoldTime time.Duration `json:",omitempty"`
}

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "nc"
	}
	if c.Nodes == 0 {
		c.Nodes = 2
	}
	if c.PodsPerNode == 0 && !c.Kubelet {
		c.PodsPerNode = 2
	}
	if c.Kubelet {
		c.PodsPerNode, c.APIServer = 0, true
	}
	if c.Routed && c.Racks == 0 {
		c.Racks = 2
	}
	if c.Routed && c.BGPHoldTime == 0 {
		c.BGPHoldTime = 9 * time.Second
	}
}

// Node is one sandbox node.
type Node struct {
	Name    string     // node1, node2, ...
	Netns   string     // <sandbox>-node1
	IP4     netip.Addr // underlay address
	IP6     netip.Addr
	Pods    []Pod
	PodNet  netip.Prefix // this node's IPv4 pod CIDR
	PodNet6 netip.Prefix
	Cgroup  string // the pods' parent cgroup (socket-LB attach point)
	// HostCgroup holds the node's own processes started by the tests
	// (under Cgroup: socket-LB applies to them as on a real node, whose
	// socket-LB cgroup is the root).
	HostCgroup string
	PinDir     string
	// Zone is the node's topology.kubernetes.io/zone (real nodes' kubelet
	// registers it): Zones in turn, node1 in the first.
	Zone string
	// Rack is the node's rack when the sandbox is routed (1..), 0
	// otherwise; its label netcube.io/rack is RackName(Rack).
	Rack int
}

// Zones are the zones real nodes are spread over, in turn: the
// EndpointSlice controller hints endpoints for zones, and traffic
// distribution (PreferClose, PreferSameZone) and topology-aware routing
// (Auto) prefer them, only from the Node objects' zone labels; the
// upstream tests of both need at least three zones (so three nodes, one
// in each; six give each zone two).
var Zones = []string{"a", "b", "c"}

// Pod is one sandbox pod, wired by the CNI plugin.
type Pod struct {
	Name   string // n1p1: node 1, pod 1
	Node   string
	Netns  string
	HostIf string // host-side veth, in the node's namespace (named by the plugin)
	// IP4, IP6: what the plugin's IPAM hands out, in pod order, on a
	// fresh node (the sandbox checks it did).
	IP4    netip.Addr
	IP6    netip.Addr
	Cgroup string
}

// Host is a machine outside the cluster on the nodes' network: the client
// of NodePorts, ExternalIPs and LoadBalancer IPs.
type Host struct {
	Name  string // "external"
	Netns string // <sandbox>-external
	IP4   netip.Addr
	IP6   netip.Addr
}

// Topology is the whole sandbox, derived from its Config alone.
type Topology struct {
	Name       string
	StateDir   string // /run/netcube/<name>: manifests, logs, pid files
	Underlay   string // netns of the underlay bridge
	External   Host   // a client outside the cluster, on the underlay
	Router     Host   // a router on the underlay to the far network (IP4/IP6: its underlay side)
	Far        Host   // a host behind Router, over a link of FarMTU
	CgroupRoot string // netcube-<name> under the cgroup2 mount
	PinRoot    string // /sys/fs/bpf/netcube/<name>
	Nodes      []Node
	// Racks are the routed sandbox's racks (routed.go; nil otherwise).
	Racks []Rack
	// BGPHold is the routed sandbox's BGP hold time.
	BGPHold time.Duration
}

// Addresses inside the sandbox (only ever used within its namespaces).
const (
	underlay4  = "172.30.0.%d"
	underlay6  = "fd00:172:30::%d"
	podNet4    = "10.244.%d.0/24"
	podNet6    = "fd00:10:244:%d::/64"
	podIP4     = "10.244.%d.%d"
	podIP6     = "fd00:10:244:%d::%d"
	nodeOffset = 10
	externalIP = 200 // the external client's host part on the underlay
	routerIP   = 254 // the router's host part on the underlay
	farNet4    = "172.31.0.%d"
	farNet6    = "fd00:172:31::%d"
	// FarMTU is the MTU of the link between Router and Far: smaller than
	// the pods' 1500, so that a pod's large packet to Far meets
	// fragmentation needed (packet too big) at the router; IPv6's
	// minimum, so both families share it.
	FarMTU = 1280
)

// Layout computes the topology of cfg. cgroupMount is the cgroup2 mount.
func Layout(cfg Config, cgroupMount string) Topology {
	cfg.defaults()
	t := Topology{
		Name:       cfg.Name,
		StateDir:   filepath.Join("/run/netcube", cfg.Name),
		Underlay:   cfg.Name + "-underlay",
		CgroupRoot: filepath.Join(cgroupMount, "netcube-"+cfg.Name),
		PinRoot:    filepath.Join("/sys/fs/bpf/netcube", cfg.Name),
		External: Host{
			Name:  "external",
			Netns: cfg.Name + "-external",
			IP4:   netip.MustParseAddr(fmt.Sprintf(underlay4, externalIP)),
			IP6:   netip.MustParseAddr(fmt.Sprintf(underlay6, externalIP)),
		},
		Router: Host{
			Name:  "router",
			Netns: cfg.Name + "-router",
			IP4:   netip.MustParseAddr(fmt.Sprintf(underlay4, routerIP)),
			IP6:   netip.MustParseAddr(fmt.Sprintf(underlay6, routerIP)),
		},
		Far: Host{
			Name:  "far",
			Netns: cfg.Name + "-far",
			IP4:   netip.MustParseAddr(fmt.Sprintf(farNet4, 2)),
			IP6:   netip.MustParseAddr(fmt.Sprintf(farNet6, 2)),
		},
	}
	for i := 1; i <= cfg.Nodes; i++ {
		n := Node{
			Name:       fmt.Sprintf("node%d", i),
			Netns:      fmt.Sprintf("%s-node%d", cfg.Name, i),
			IP4:        netip.MustParseAddr(fmt.Sprintf(underlay4, nodeOffset+i)),
			IP6:        netip.MustParseAddr(fmt.Sprintf(underlay6, nodeOffset+i)),
			PodNet:     netip.MustParsePrefix(fmt.Sprintf(podNet4, i)),
			PodNet6:    netip.MustParsePrefix(fmt.Sprintf(podNet6, i)),
			Cgroup:     filepath.Join(t.CgroupRoot, fmt.Sprintf("node%d", i)),
			HostCgroup: filepath.Join(t.CgroupRoot, fmt.Sprintf("node%d", i), "host"),
			PinDir:     filepath.Join(t.PinRoot, fmt.Sprintf("node%d", i)),
			Zone:       Zones[(i-1)%len(Zones)],
		}
		// host-local hands out .2 on (the bridge holds .1); netcube's
		// IPAM .1 on.
		first := 1
		if cfg.PodNetwork == PodNetworkFlannel {
			first = 2
		}
		for k := 1; k <= cfg.PodsPerNode; k++ {
			name := fmt.Sprintf("n%dp%d", i, k)
			p := Pod{
				Name:   name,
				Node:   n.Name,
				Netns:  cfg.Name + "-" + name,
				IP4:    netip.MustParseAddr(fmt.Sprintf(podIP4, i, first+k-1)),
				IP6:    netip.MustParseAddr(fmt.Sprintf(podIP6, i, first+k-1)),
				Cgroup: filepath.Join(n.Cgroup, name),
			}
			if cfg.PodNetwork != PodNetworkFlannel { // the bridge plugin names its veths at random
				p.HostIf = cni.HostIfName(containerID(p), "eth0")
			}
			n.Pods = append(n.Pods, p)
		}
		t.Nodes = append(t.Nodes, n)
	}
	if cfg.Routed {
		t.rack(cfg.Racks)
		t.BGPHold = cfg.BGPHoldTime
	}
	return t
}

// Node finds a node by name.
func (t Topology) Node(name string) (Node, bool) {
	for _, n := range t.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Pod finds a pod by name.
func (t Topology) Pod(name string) (Pod, bool) {
	for _, n := range t.Nodes {
		for _, p := range n.Pods {
			if p.Name == name {
				return p, true
			}
		}
	}
	return Pod{}, false
}

// Pods lists every pod.
func (t Topology) Pods() []Pod {
	var out []Pod
	for _, n := range t.Nodes {
		out = append(out, n.Pods...)
	}
	return out
}

// ManifestDir is the directory the agents watch.
func (t Topology) ManifestDir() string { return filepath.Join(t.StateDir, "manifests") }

// LogDir holds the agents' and pods' logs.
func (t Topology) LogDir() string { return filepath.Join(t.StateDir, "logs") }
