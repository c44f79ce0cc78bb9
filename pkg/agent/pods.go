package agent

import (
	"fmt"
	"github.com/netcube/netcube/pkg/bgp"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/cni"
	"github.com/netcube/netcube/pkg/cni/cnisocket"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source"
)

// pods attaches the pod programs to pods' host-side veths: those that
// exist when the agent starts (pods wired before a restart), then each pod
// the CNI plugin reports over the agent's socket before its ADD returns.
// Nothing polls for interfaces.
type pods struct {
	dp       *datapath.Datapath
	prefix   string
	handlers []cube.PodHandler // the cubes told of each pod
	mu       sync.Mutex
}

var _ cnisocket.AgentHandler = (*pods)(nil)

// attachExisting attaches to every pod veth present and forgets the links
// of veths that are gone.
func (p *pods) attachExisting() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	present, err := p.present()
	if err != nil {
		return err
	}
	for name, index := range present {
		if err := p.dp.AttachPod(name, index); err != nil {
			return err
		}
	}
	slog.Info("pod interfaces attached", "count", len(present))
	return p.prune(present)
}

func (p *pods) present() (map[string]int, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, ifc := range ifaces {
		if strings.HasPrefix(ifc.Name, p.prefix) {
			out[ifc.Name] = ifc.Index
		}
	}
	return out, nil
}

func (p *pods) prune(present map[string]int) error {
	keep := map[string]bool{}
	for name := range present {
		keep[name] = true
	}
	return p.dp.PrunePods(keep)
}

func (p *pods) Ready() error { return nil } // served once the datapath is loaded

func (p *pods) PodAdded(pod cni.Pod) error {
	if !strings.HasPrefix(pod.HostIf, p.prefix) {
		return fmt.Errorf("pod veth %q is not named %s* (--pod-iface-prefix)", pod.HostIf, p.prefix)
	}
	ifc, err := net.InterfaceByName(pod.HostIf)
	if err != nil {
		return fmt.Errorf("pod veth %s: %w", pod.HostIf, err)
	}
	if pod.HostIfIndex != 0 && ifc.Index != pod.HostIfIndex {
		return fmt.Errorf("pod veth %s is ifindex %d, the plugin made %d", pod.HostIf, ifc.Index, pod.HostIfIndex)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.dp.AttachPod(ifc.Name, ifc.Index); err != nil {
		return err
	}
	for _, h := range p.handlers {
		if err := h.PodUp(ifc.Name); err != nil {
			return err
		}
	}
	slog.Info("pod attached", "container", pod.ContainerID, "iface", pod.HostIf, "addrs", pod.Addrs)
	return nil
}

func (p *pods) PodDeleted(pod cni.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	present, err := p.present()
	if err != nil {
		return err
	}
	slog.Info("pod deleted", "container", pod.ContainerID, "iface", pod.HostIf)
	for _, h := range p.handlers {
		if err := h.PodDown(pod.HostIf); err != nil {
			return err
		}
	}
	return p.prune(present)
}

// cniConfig installs the CNI conflist for this node's pod CIDRs, from its
// Node object: the runtime starts pods only once it is there.
type cniConfig struct {
	cfg  Config
	mu   sync.Mutex
	have []netip.Prefix
}

func (c *cniConfig) onNode(node *model.NodeInfo) {
	var cidrs []netip.Prefix
	if node != nil {
		cidrs = node.PodCIDRs
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Equal(cidrs, c.have) && c.have != nil {
		return
	}
	c.have = cidrs
	if len(cidrs) == 0 {
		slog.Warn("this node has no pod CIDR (spec.podCIDRs): no CNI config, so no pod starts here", "node", c.cfg.NodeName)
		if err := cni.RemoveConfList(c.cfg.CNIConfDir); err != nil {
			slog.Error("remove the CNI config", "err", err)
		}
		return
	}
	if err := cni.WriteConfList(c.cfg.CNIConfDir, cni.ConfList{PodCIDRs: cidrs, MTU: c.cfg.MTU, PodDevice: c.cfg.PodDevice,
		DataDir: c.cfg.IPAMDir, Socket: c.cfg.CNISocket, Chained: c.chained()}); err != nil {
		slog.Error("write the CNI config", "dir", c.cfg.CNIConfDir, "err", err)
		return
	}
	slog.Info("CNI config installed", "dir", c.cfg.CNIConfDir, "pod_cidrs", cidrs)
}

// chained are the plugins chained after netcube's: the hostPort plugin,
// when the runtime's CNI bin directory holds it.
func (c *cniConfig) chained() []string {
	p := c.cfg.HostPortPlugin
	if p == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.cfg.CNIBinDir, p)); err != nil {
		slog.Warn("no hostPort plugin in the CNI bin directory: pods' hostPorts are not served", "plugin", p, "dir", c.cfg.CNIBinDir)
		return nil
	}
	return []string{p}
}

// nodeTee hands Node objects to the cubes that route between nodes, and
// this node's to the CNI config, besides the Service reconciler.
type nodeTee struct {
	source.Handler
	name  string
	cni   *cniConfig
	nodes []cube.NodeHandler
	bgp   *bgp.Controller // the NetworkBGPPeerings' (nil: none kept)
}

func (t nodeTee) OnBGPPeering(name string, p *model.BGPPeering) {
	if t.bgp != nil {
		t.bgp.OnBGPPeering(name, p)
	}
}

func (t nodeTee) OnBGPPeeringsSynced() {
	if t.bgp != nil {
		t.bgp.OnBGPPeeringsSynced()
	}
}

func (t nodeTee) BGPPeeringKeys() []string {
	if t.bgp == nil {
		return nil
	}
	return t.bgp.BGPPeeringKeys()
}

func (t nodeTee) OnNode(name string, node *model.NodeInfo) {
	if name == t.name && t.cni != nil {
		t.cni.onNode(node)
	}
	for _, h := range t.nodes {
		h.OnNode(name, node)
	}
	t.Handler.OnNode(name, node)
}

func (t nodeTee) OnSynced() {
	for _, h := range t.nodes {
		h.OnNodesSynced()
	}
	t.Handler.OnSynced()
}

// policyTee is the handler of a source when a cube enforces NetworkPolicy:
// the Services' and Nodes' handler, and the policy cube's.
type policyTee struct {
	nodeTee
	source.PolicyHandler
}

// OnClusterPolicy and ClusterPolicyKeys pass the ClusterNetworkPolicies
// to the policy cube, if it takes them.
func (t policyTee) OnClusterPolicy(name string, p *model.ClusterPolicy) {
	if ch, ok := t.PolicyHandler.(source.ClusterPolicyHandler); ok {
		ch.OnClusterPolicy(name, p)
	}
}

func (t policyTee) ClusterPolicyKeys() []string {
	if ch, ok := t.PolicyHandler.(source.ClusterPolicyHandler); ok {
		return ch.ClusterPolicyKeys()
	}
	return nil
}

// slicesTee is policyTee with a cube placing pods in network slices: it
// is given the NetworkSlices, and the pods and namespaces too.
type slicesTee struct {
	policyTee
	slices cube.SliceHandler
}

func (t slicesTee) OnPod(key types.NamespacedName, pod *model.Pod) {
	t.policyTee.OnPod(key, pod)
	t.slices.OnPod(key, pod)
}

func (t slicesTee) OnNamespace(name string, ns *model.Namespace) {
	t.policyTee.OnNamespace(name, ns)
	t.slices.OnNamespace(name, ns)
}

func (t slicesTee) OnPoliciesSynced() {
	t.policyTee.OnPoliciesSynced()
	t.slices.OnPodsSynced()
}

func (t slicesTee) OnSlice(name string, s *model.Slice) { t.slices.OnSlice(name, s) }
func (t slicesTee) OnSlicesSynced()                     { t.slices.OnSlicesSynced() }
func (t slicesTee) SliceKeys() []string                 { return t.slices.SliceKeys() }

// checkPodDevice fails the agent's start on a --pod-device it cannot give
// pods: a name it does not know, or netkit on a kernel that cannot make a
// netkit pair (what the kernel answered). A hollow agent makes no pods.
func checkPodDevice(device string, hollow bool) error {
	if err := cni.CheckPodDevice(device); err != nil {
		return fmt.Errorf("--pod-device: %w", err)
	}
	if device != cni.PodDeviceNetkit || hollow {
		return nil
	}
	if err := cni.ProbeNetkit(); err != nil {
		return fmt.Errorf("--pod-device netkit: %w (--pod-device veth works on any kernel)", err)
	}
	return nil
}

// podMTU is the pods' MTU: the uplink's, less the overlay's overhead.
func podMTU(routing string, uplinkMTU int) int {
	if uplinkMTU == 0 {
		return 0 // the plugin's default
	}
	if routing == router.VXLAN {
		return uplinkMTU - router.OverlayOverhead
	}
	return uplinkMTU
}
