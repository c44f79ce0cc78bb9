package bench

// The NodePort benchmark (issue 33, item 1's measurement; `netcube-lab
// bench nodeport`): what a client outside the cluster gets from a
// NodePort whose backend is on another node (externalTrafficPolicy
// Cluster: node1 DNATs to the pod on node2 and SNATs to itself), with
// node1's Service data plane in each mode:
//
//   - tc: netcube's agents with --nodeport-acceleration=none (the tc
//     program on the uplink, bpf/entry/tc_node.c).
//   - xdp: --nodeport-acceleration=xdp (an XDP program on the uplink
//     balances the NodePort packets and sends them back out with XDP_TX).
//   - xdp-dsr: the same with --nodeport-mode dsr (direct server return:
//     the frontend written into the packet, node2 answering the client).
//   - kube-proxy-iptables: the real kube-proxy (iptables mode, nft
//     backend) on node1, its agent stopped and its pins removed (as bench
//     compare and slices do: netcube's datapath cannot leave a Service to
//     kube-proxy on a node it runs); node2 keeps netcube (tc). kube-proxy
//     reads a kube-apiserver and etcd the bench runs on node1's loopback.
//
// Modes are switched within each run (tc, xdp, xdp-dsr,
// kube-proxy-iptables, then again), and each measures, per family:
//
//  1. packets/s: xdpgen's generator in the external client's namespace
//     sends UDP frames (60 bytes IPv4, 80 IPv6) to node1's address and
//     the NodePort, the source port cycling over 1,024
//     values, with BPF_PROG_TEST_RUN in live-frames mode on CPU 0 (XDP_TX
//     out of the client's eth0). The path runs on the sender's CPU: the
//     kernel carries each batch of frames through it (softirq) before the
//     generator makes the next, so the sender offers what the path takes
//     and the rate is the path's cost on one CPU, the sender's own small
//     share included. That the sender can exceed the path is measured
//     apart: the generator alone, into a bare veth pair whose other end
//     drops in XDP (SenderPPS). (Handing the path to CPU 1 instead, by RPS
//     or threaded NAPI on the client's wire, made it collapse under the
//     overload, to 10-50 kpps: every veth hop's netif_rx queues on that
//     CPU's one backlog, which the flood fills, so the later hops drop.)
//     Counted: frames generated (the program's counter), taken by the
//     wire (ext's rx) and not (ext's rx_dropped), forwarded by node1 (the
//     underlay port towards node2, n2, tx), and delivered: an XDP program
//     on the backend pod's eth0 (generic mode: it sees the packets
//     bpf_redirect_peer hands over) counts and drops UDP to the port.
//  2. throughput: iperf3, one TCP stream, client CPU 0, server CPU 1.
//  3. latency: ncperf rr (one connection, 1 byte each way), client and
//     server on CPU 1.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/lab/bench/native"
	"github.com/netcube/netcube/lab/bench/xdpgen"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/datapath"
)

// NodePortConfig configures `netcube-lab bench nodeport`.
type NodePortConfig struct {
	Runs     int
	Duration time.Duration // of each measurement
	Modes    []string      // default NodePortModes, in this order each run
	Families []string      // IPv4, IPv6 (default both)
	BinDir   string
	ToolsDir string // kube-proxy, kube-apiserver, etcd (kube-proxy-iptables only)
	OutDir   string // nodeport.{json,md} and plots/; "": none
	Log      io.Writer
	Command  string // how the report says to reproduce it
	Sandbox  string // default "npb"
}

// NodePort modes.
const (
	NodePortTC        = "tc"
	NodePortXDP       = "xdp"
	NodePortKubeProxy = "kube-proxy-iptables"
	// NodePortXDPDSR: XDP with direct server return (--nodeport-mode
	// dsr): node2 answers the client itself.
	NodePortXDPDSR = "xdp-dsr"
)

// NodePortModes are the measured modes, in the report's order.
var NodePortModes = []string{NodePortTC, NodePortXDP, NodePortXDPDSR, NodePortKubeProxy}

// npAgentModes are the agents' settings of netcube's modes: acceleration
// and NodePort mode.
var npAgentModes = map[string][2]string{
	NodePortTC:     {"none", "snat"},
	NodePortXDP:    {"xdp", "snat"},
	NodePortXDPDSR: {"xdp", "dsr"},
}

// Service ports: UDP for packets/s (nothing listens: the pod's counter
// drops them), iperf3, ncperf.
const (
	npPPSPort       = 9999
	npPPSNodePort   = 30999
	npIperfPort     = 5201
	npIperfNodePort = 30201
	npRRPort        = 7000
	npRRNodePort    = 30700
	npSrcPortBase   = 20000
	npSrcPorts      = 1024
	npChunk         = 1 << 15 // frames per BPF_PROG_TEST_RUN call
)

// NodePortReport is nodeport.json.
type NodePortReport struct {
	RunHeader
	Modes    []string        `json:"modes"`
	Families []string        `json:"families"`
	Points   []NodePortPoint `json:"points"`
	// NotMeasured: the modes of the report without figures, and why.
	NotMeasured map[string]string `json:"not_measured"`
	// SenderPPS: the generator alone, per family: frames/s into a bare
	// veth pair whose other end drops them in XDP (the sender's ceiling).
	SenderPPS map[string]float64 `json:"sender_pps"`
}

// NodePortPoint is one mode and family, every run's figures.
type NodePortPoint struct {
	Mode   string          `json:"mode"`
	Family string          `json:"family"`
	PPS    []NodePortPPS   `json:"pps"`
	TCP    []float64       `json:"tcp_gbps"`
	RR     []native.Result `json:"rr"`
}

// NodePortPPS is one packets/s measurement (per second of sending).
type NodePortPPS struct {
	Seconds   float64 `json:"seconds"`
	Generated float64 `json:"generated_pps"` // frames the generator produced
	Offered   float64 `json:"offered_pps"`   // taken by the wire (ext rx)
	Refused   float64 `json:"refused_pps"`   // the wire's ring full (ext rx_dropped)
	Forwarded float64 `json:"forwarded_pps"` // node1 -> node2 (n2 tx)
	Delivered float64 `json:"delivered_pps"` // counted in the backend pod
	// XDPForwarded: what node1's XDP program sent back out itself
	// (XDP_TX; its monitor_xdp counter): in mode xdp, all of Forwarded.
	XDPForwarded float64 `json:"xdp_forwarded_pps"`
}

// RunNodePort runs the benchmark and writes nodeport.{json,md} and the
// plots.
func RunNodePort(cfg NodePortConfig) (*NodePortReport, error) {
	if len(cfg.Modes) == 0 {
		cfg.Modes = NodePortModes
	}
	for _, m := range cfg.Modes {
		if !slices.Contains(NodePortModes, m) {
			return nil, fmt.Errorf("mode %q: want one of %s", m, strings.Join(NodePortModes, ", "))
		}
	}
	if len(cfg.Families) == 0 {
		cfg.Families = []string{"IPv4", "IPv6"}
	}
	for _, f := range cfg.Families {
		if f != "IPv4" && f != "IPv6" {
			return nil, fmt.Errorf("family %q: want IPv4 or IPv6", f)
		}
	}
	if cfg.Sandbox == "" {
		cfg.Sandbox = "npb"
	}
	tmp, err := os.MkdirTemp("", "netcube-nodeport-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	rep := &NodePortReport{RunHeader: newRunHeader(cfg.Runs, cfg.Duration, cfg.Command),
		Modes: cfg.Modes, Families: cfg.Families, NotMeasured: map[string]string{}}
	for _, m := range NodePortModes {
		if !slices.Contains(cfg.Modes, m) {
			rep.NotMeasured[m] = "not measured in this run (--modes " + strings.Join(cfg.Modes, ",") + ")"
		}
	}
	b := &nodePortBench{cfg: cfg, tmp: tmp, state: map[string]string{}, gens: map[string]*xdpgen.Generator{}}
	defer b.close()
	stop := b.onInterrupt()
	defer stop()
	t0 := time.Now()
	fmt.Fprintf(cfg.Log, "calibration: the sender alone, into a bare veth pair\n")
	if rep.SenderPPS, err = calibrateSender(cfg.Families, cfg.Duration); err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	for _, f := range cfg.Families {
		fmt.Fprintf(cfg.Log, "  %s: %.3f Mpps\n", f, rep.SenderPPS[f]/1e6)
	}
	if err := b.up(); err != nil {
		return nil, err
	}
	points := map[string]*NodePortPoint{}
	for _, m := range cfg.Modes {
		for _, f := range cfg.Families {
			p := &NodePortPoint{Mode: m, Family: f}
			points[m+" "+f] = p
		}
	}
	for run := 1; run <= cfg.Runs; run++ {
		for _, mode := range cfg.Modes {
			fmt.Fprintf(cfg.Log, "run %d/%d: %s (%s elapsed)\n", run, cfg.Runs, mode, time.Since(t0).Round(time.Second))
			if err := b.setMode(mode); err != nil {
				return nil, fmt.Errorf("mode %s: %w", mode, err)
			}
			for _, fam := range cfg.Families {
				p := points[mode+" "+fam]
				if err := b.measure(fam, p); err != nil {
					return nil, fmt.Errorf("run %d, %s %s: %w", run, mode, fam, err)
				}
				l := len(p.PPS) - 1
				s := p.PPS[l]
				fmt.Fprintf(cfg.Log, "  %-19s %s: delivered %.3f Mpps, node1 forwarded %.3f (by XDP %.3f), offered %.3f (generated %.3f, refused %.3f); TCP %.2f Gbit/s; rr p50 %.1f µs p99 %.1f µs\n",
					mode, fam, s.Delivered/1e6, s.Forwarded/1e6, s.XDPForwarded/1e6, s.Offered/1e6, s.Generated/1e6, s.Refused/1e6, p.TCP[l], p.RR[l].P50, p.RR[l].P99)
				if mode == NodePortXDP && s.XDPForwarded < 0.9*s.Forwarded {
					fmt.Fprintf(cfg.Log, "  warning: node1's XDP program sent out %.0f of the %.0f packets/s node1 forwarded: the rest took the tc path\n", s.XDPForwarded, s.Forwarded)
				}
			}
		}
	}
	for _, m := range cfg.Modes {
		for _, f := range cfg.Families {
			rep.Points = append(rep.Points, *points[m+" "+f])
		}
	}
	fmt.Fprintf(cfg.Log, "done in %s\n", time.Since(t0).Round(time.Second))
	return rep, rep.Write(cfg.OutDir)
}

type nodePortBench struct {
	cfg    NodePortConfig
	tmp    string
	ncperf string
	state  map[string]string // node -> its agent's acceleration/NodePort mode ("none/snat", "xdp/dsr"), "down"

	mu       sync.Mutex // close may run from the signal handler
	closed   bool
	sb       *sandbox.Sandbox
	env      *kubeenv.Env
	kp       *KubeProxy
	counter  *xdpgen.Counter
	underlay *netlink.Handle
	gens     map[string]*xdpgen.Generator // by family
	extIndex int                          // the client's eth0
	node1    sandbox.Node
	node2    sandbox.Node
	backend  sandbox.Pod
}

// up starts the sandbox (2 nodes, a pod each; no example Services), the
// Service, the servers, the counter, the generators, and the API server
// when kube-proxy is measured.
func (b *nodePortBench) up() error {
	if b.ncperf == "" {
		var err error
		if b.ncperf, err = native.Build(b.tmp); err != nil {
			return err
		}
	}
	empty := filepath.Join(b.tmp, "manifests")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return err
	}
	_ = sandbox.Down(b.cfg.Sandbox, io.Discard)
	fmt.Fprintf(b.cfg.Log, "sandbox %s: 2 nodes x 1 pod, native routing\n", b.cfg.Sandbox)
	// The underlay readied for XDP in every mode (a pass-through program
	// on its veth ends, for NAPI, and complete checksums): one wire for
	// all.
	c := sandbox.Config{Name: b.cfg.Sandbox, Nodes: 2, PodsPerNode: 1, Routing: "native", BinDir: b.cfg.BinDir, Manifests: empty,
		XDPUnderlay: true, NodePortAcceleration: "none"}
	var log strings.Builder
	sb, err := sandbox.Up(c, &log)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, log.String())
	}
	b.mu.Lock()
	b.sb = sb
	b.mu.Unlock()
	t := sb.Topology
	b.node1, b.node2, b.backend = t.Nodes[0], t.Nodes[1], t.Nodes[1].Pods[0]
	for _, n := range t.Nodes {
		b.state[n.Name] = "none/snat"
	}
	if err := t.WriteManifest("nodeport.yaml", b.serviceYAML()); err != nil {
		return err
	}
	if out, err := exec.Command("ip", "netns", "exec", t.External.Netns, "sysctl", "-q", "-w",
		"net.ipv4.tcp_tw_reuse=1", "net.ipv4.ip_local_port_range=1024 65000").CombinedOutput(); err != nil {
		return fmt.Errorf("external client sysctls: %v: %s", err, out)
	}
	for _, cmd := range []*exec.Cmd{
		exec.Command("taskset", "-c", "1", b.ncperf, "serve", strconv.Itoa(npRRPort)),
		exec.Command("iperf3", "-s", "-p", strconv.Itoa(npIperfPort), "-A", "1"),
	} {
		if err := sb.Start(b.backend.Name, cmd); err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }() // sandbox down kills them
	}
	if err := b.wire(); err != nil {
		return err
	}
	if err := b.waitServing("netcube"); err != nil {
		return err
	}
	if slices.Contains(b.cfg.Modes, NodePortKubeProxy) {
		fmt.Fprintf(b.cfg.Log, "  kube-apiserver and etcd on %s's loopback (kube-proxy's)\n", b.node1.Name)
		env, err := kubeenv.Start(kubeenv.Options{Dir: filepath.Join(b.tmp, "kube"), Netns: b.node1.Netns, ToolsDir: b.cfg.ToolsDir})
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.env = env
		b.mu.Unlock()
		if err := b.apiObjects(); err != nil {
			return err
		}
	}
	return nil
}

// wire sets up what the packets/s measurement needs: the counter in the
// backend pod, NAPI in a thread on CPU 1 on the client's wire, and a
// generator per family.
func (b *nodePortBench) wire() error {
	t := b.sb.Topology
	var err error
	if b.counter, err = xdpgen.NewCounter(npPPSPort); err != nil {
		return err
	}
	if err := b.counter.Attach(b.backend.Netns, "eth0", link.XDPGenericMode); err != nil {
		return fmt.Errorf("counter on %s's eth0: %w", b.backend.Name, err)
	}
	ns, err := netns.GetFromName(t.Underlay)
	if err != nil {
		return err
	}
	defer ns.Close()
	if b.underlay, err = netlink.NewHandleAt(ns); err != nil {
		return err
	}
	// The client's frames go out with XDP_TX into ext's XDP ring: ext
	// needs NAPI, which the sandbox's pass-through program gives it.
	ext, err := b.underlay.LinkByName("ext")
	if err != nil {
		return err
	}
	if x := ext.Attrs().Xdp; x == nil || !x.Attached {
		return errors.New("the sandbox left no XDP program on the client's underlay port (ext): its NAPI is off, the generator's frames would be refused")
	}
	extMAC, err := linkMAC(t.External.Netns, "eth0")
	if err != nil {
		return err
	}
	n1MAC, err := linkMAC(b.node1.Netns, "eth0")
	if err != nil {
		return err
	}
	if err := xdpgen.InNetns(t.External.Netns, func() error {
		ifi, err := net.InterfaceByName("eth0")
		b.extIndex = ifi.Index
		return err
	}); err != nil {
		return err
	}
	for _, fam := range b.cfg.Families {
		src, dst := t.External.IP4, b.node1.IP4
		if fam == "IPv6" {
			src, dst = t.External.IP6, b.node1.IP6
		}
		g, err := xdpgen.NewGenerator(xdpgen.Frame{SrcMAC: extMAC, DstMAC: n1MAC, Src: src, Dst: dst,
			SrcPort: npSrcPortBase, Ports: npSrcPorts, DstPort: npPPSNodePort})
		if err != nil {
			return err
		}
		b.gens[fam] = g
	}
	return nil
}

func linkMAC(ns, ifname string) (net.HardwareAddr, error) {
	h, err := nsHandle(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", ifname, ns, err)
	}
	return l.Attrs().HardwareAddr, nil
}

func nsHandle(name string) (*netlink.Handle, error) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}

// serviceYAML: the NodePort Service in netcube's manifests, its backend
// the pod on node2.
func (b *nodePortBench) serviceYAML() string {
	var s strings.Builder
	s.WriteString("apiVersion: v1\nkind: Service\nmetadata:\n  name: nodeport\n  namespace: default\nspec:\n")
	s.WriteString("  type: NodePort\n  externalTrafficPolicy: Cluster\n  ipFamilyPolicy: RequireDualStack\n")
	fmt.Fprintf(&s, "  clusterIP: %s\n  clusterIPs: [%s]\n  ports:\n", benchIPs[0], strings.Join(benchIPs, ", "))
	for _, p := range npPorts() {
		fmt.Fprintf(&s, "  - {name: %s, port: %d, protocol: %s, targetPort: %d, nodePort: %d}\n", p.Name, p.Port, p.Protocol, p.TargetPort.IntVal, p.NodePort)
	}
	var eps []sandbox.PortSpec
	for _, p := range npPorts() {
		eps = append(eps, sandbox.PortSpec{Name: p.Name, Port: int(p.Port), Protocol: string(p.Protocol)})
	}
	pods := []sandbox.Pod{b.backend}
	return s.String() + "---\n" + sandbox.SliceYAML("nodeport", false, eps, pods) + "---\n" + sandbox.SliceYAML("nodeport", true, eps, pods)
}

func npPorts() []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: "pps", Port: npPPSPort, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(npPPSPort), NodePort: npPPSNodePort},
		{Name: "iperf", Port: npIperfPort, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(npIperfPort), NodePort: npIperfNodePort},
		{Name: "rr", Port: npRRPort, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(npRRPort), NodePort: npRRNodePort},
	}
}

// apiObjects creates what kube-proxy reads: the nodes with their
// addresses, the Service, its EndpointSlices.
func (b *nodePortBench) apiObjects() error {
	ctx := context.Background()
	api := b.env.Client
	for _, n := range b.sb.Topology.Nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Spec: corev1.NodeSpec{PodCIDR: n.PodNet.String(), PodCIDRs: []string{n.PodNet.String(), n.PodNet6.String()}}}
		created, err := api.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.IP4.String()}, {Type: corev1.NodeInternalIP, Address: n.IP6.String()}}
		if _, err := api.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	svc := measuredService("nodeport", benchIPs, corev1.ServiceTypeNodePort, npPorts())
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if _, err := api.CoreV1().Services(benchNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, fam := range bothFamilies {
		addr := b.backend.IP4.String()
		if fam == discoveryv1.AddressTypeIPv6 {
			addr = b.backend.IP6.String()
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "nodeport-" + strings.ToLower(string(fam)), Namespace: benchNS,
				Labels: map[string]string{discoveryv1.LabelServiceName: "nodeport"}},
			AddressType: fam,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: &b.backend.Node,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: benchNS, Name: b.backend.Name}}},
		}
		for _, p := range npPorts() {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol})
		}
		if _, err := api.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// setMode puts node1's data plane in mode: the agents restarted on empty
// pins with the mode's acceleration (tc, xdp: both nodes), or node1's
// agent stopped and kube-proxy started (node2's agent on tc).
func (b *nodePortBench) setMode(mode string) error {
	restart := func(n sandbox.Node, agent [2]string) error {
		setting := agent[0] + "/" + agent[1]
		if b.state[n.Name] == setting {
			return nil
		}
		b.sb.Config.NodePortAcceleration, b.sb.Config.NodePortMode = agent[0], agent[1]
		p := &netcubePeer{sb: b.sb, node: n}
		if b.state[n.Name] != "down" {
			if err := p.stop(); err != nil {
				return err
			}
		}
		b.state[n.Name] = "down"
		if err := p.start(); err != nil {
			return err
		}
		b.state[n.Name] = setting
		return nil
	}
	who := "netcube"
	switch mode {
	case NodePortTC, NodePortXDP, NodePortXDPDSR:
		if err := b.stopKubeProxy(); err != nil {
			return err
		}
		for _, n := range []sandbox.Node{b.node1, b.node2} {
			if err := restart(n, npAgentModes[mode]); err != nil {
				return err
			}
		}
	case NodePortKubeProxy:
		who = "kube-proxy"
		if err := restart(b.node2, npAgentModes[NodePortTC]); err != nil {
			return err
		}
		if b.kp == nil {
			if b.state[b.node1.Name] != "down" {
				if err := (&netcubePeer{sb: b.sb, node: b.node1}).stop(); err != nil {
					return err
				}
				b.state[b.node1.Name] = "down"
			}
			kp := &KubeProxy{Mode: KubeProxyModes[0], Node: b.node1, Tools: b.cfg.ToolsDir, Config: b.env.Kubeconfig,
				LogFile: filepath.Join(b.sb.Topology.LogDir(), "kube-proxy.log")}
			if err := kp.start(); err != nil {
				return err
			}
			b.mu.Lock()
			b.kp = kp
			b.mu.Unlock()
		}
	}
	return b.waitServing(who)
}

func (b *nodePortBench) stopKubeProxy() error {
	b.mu.Lock()
	kp := b.kp
	b.kp = nil
	b.mu.Unlock()
	if kp == nil {
		return nil
	}
	return kp.stop()
}

// waitServing waits until the external client's requests to the rr
// NodePort are answered in every family.
func (b *nodePortBench) waitServing(who string) error {
	for _, fam := range b.cfg.Families {
		var last error
		if !waitUntil(2*time.Minute, 100*time.Millisecond, func() bool {
			if b.kp != nil && b.kp.Exited() {
				last = errors.New("kube-proxy exited")
				return true
			}
			_, last = b.rr(fam, 100*time.Millisecond)
			return last == nil
		}) || last != nil {
			return fmt.Errorf("%s: the NodePort %s is not answered (%s): %v", fam, hostPort(b.nodeIP(fam), npRRNodePort), who, last)
		}
	}
	return nil
}

func (b *nodePortBench) nodeIP(fam string) string {
	if fam == "IPv6" {
		return b.node1.IP6.String()
	}
	return b.node1.IP4.String()
}

// rr runs ncperf's request/response from the external client to the
// NodePort, on CPU 1 with its server.
func (b *nodePortBench) rr(fam string, d time.Duration) (native.Result, error) {
	var r native.Result
	out, err := runIn(b.sb, b.sb.Topology.External.Name, exec.Command("taskset", "-c", "1", b.ncperf, "rr", b.nodeIP(fam),
		strconv.Itoa(npRRNodePort), strconv.FormatFloat(d.Seconds(), 'f', 3, 64)))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("ncperf output %q: %w", out, err)
	}
	if r.Ops == 0 || r.Errors > 0 {
		return r, fmt.Errorf("ncperf rr to %s: %d requests answered, %d errors", hostPort(b.nodeIP(fam), npRRNodePort), r.Ops, r.Errors)
	}
	return r, nil
}

// measure takes one run's figures of the current mode in family fam.
func (b *nodePortBench) measure(fam string, p *NodePortPoint) error {
	s, err := b.pps(fam)
	if err != nil {
		return fmt.Errorf("packets/s: %w", err)
	}
	g, err := bulk(b.sb, b.sb.Topology.External.Name, b.nodeIP(fam), npIperfNodePort, 1, "", b.cfg.Duration)
	if err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	rr, err := b.rr(fam, b.cfg.Duration)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	p.PPS, p.TCP, p.RR = append(p.PPS, s), append(p.TCP, g), append(p.RR, rr)
	return nil
}

// ppsCounts are the packets/s measurement's counters at one moment.
type ppsCounts struct {
	generated, offered, refused, forwarded, delivered, xdpForwarded uint64
}

func (b *nodePortBench) counts(gen *xdpgen.Generator) (c ppsCounts, err error) {
	if c.generated, err = gen.Sent(); err != nil {
		return c, err
	}
	if c.delivered, err = b.counter.Count(); err != nil {
		return c, err
	}
	c.xdpForwarded = b.xdpForwarded()
	for _, l := range []struct {
		name string
		get  func(*netlink.LinkStatistics)
	}{
		{"ext", func(s *netlink.LinkStatistics) { c.offered, c.refused = s.RxPackets, s.RxDropped }},
		{"n2", func(s *netlink.LinkStatistics) { c.forwarded = s.TxPackets }},
	} {
		dev, err := b.underlay.LinkByName(l.name)
		if err != nil {
			return c, err
		}
		if dev.Attrs().Statistics == nil {
			return c, fmt.Errorf("%s: no statistics", l.name)
		}
		l.get(dev.Attrs().Statistics)
	}
	return c, nil
}

// xdpForwarded is how many packets node1's XDP program has sent back out
// itself (0 without netcube's maps on node1: kube-proxy).
func (b *nodePortBench) xdpForwarded() uint64 {
	maps, done, err := datapath.OpenPinned(b.node1.PinDir)
	if err != nil {
		return 0
	}
	defer done()
	return cube.PerCPUSum(maps.Map(monitor.MapXDP), uint32(datapath.MonXDPForwarded))
}

// pps sends for the measurement's duration (after a short warm-up that
// opens the flows) and reads the counters before and after.
func (b *nodePortBench) pps(fam string) (NodePortPPS, error) {
	gen := b.gens[fam]
	if _, err := b.send(gen, 300*time.Millisecond); err != nil {
		return NodePortPPS{}, err
	}
	time.Sleep(200 * time.Millisecond)
	c0, err := b.counts(gen)
	if err != nil {
		return NodePortPPS{}, err
	}
	d, err := b.send(gen, b.cfg.Duration)
	if err != nil {
		return NodePortPPS{}, err
	}
	time.Sleep(300 * time.Millisecond) // what is still queued arrives
	c1, err := b.counts(gen)
	if err != nil {
		return NodePortPPS{}, err
	}
	sec := d.Seconds()
	rate := func(a, b uint64) float64 { return float64(b-a) / sec }
	return NodePortPPS{Seconds: sec, Generated: rate(c0.generated, c1.generated), Offered: rate(c0.offered, c1.offered),
		Refused: rate(c0.refused, c1.refused), Forwarded: rate(c0.forwarded, c1.forwarded), Delivered: rate(c0.delivered, c1.delivered),
		XDPForwarded: rate(c0.xdpForwarded, c1.xdpForwarded)}, nil
}

// send runs the generator for d from the external client's namespace.
func (b *nodePortBench) send(gen *xdpgen.Generator, d time.Duration) (time.Duration, error) {
	return sendFor(b.sb.Topology.External.Netns, b.extIndex, gen, d)
}

// sendFor runs a generator for d in namespace ns, out of device ifindex,
// on CPU 0, and returns how long it sent.
func sendFor(ns string, ifindex int, gen *xdpgen.Generator, d time.Duration) (time.Duration, error) {
	var elapsed time.Duration
	err := xdpgen.InNetns(ns, func() error {
		var old, cpu0 unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			return err
		}
		cpu0.Set(0)
		if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
			return err
		}
		defer unix.SchedSetaffinity(0, &old) //nolint:errcheck
		t0 := time.Now()
		for time.Since(t0) < d {
			if err := gen.Send(ifindex, npChunk); err != nil {
				return err
			}
		}
		elapsed = time.Since(t0)
		return nil
	})
	return elapsed, err
}

// calibrateSender measures the generator alone, per family: its frames
// into a bare veth pair between two namespaces, the far end dropping
// them in XDP (native mode), for d, on CPU 0 (the far end's NAPI with
// it).
func calibrateSender(fams []string, d time.Duration) (map[string]float64, error) {
	a, z := fmt.Sprintf("npcal%d-a", os.Getpid()), fmt.Sprintf("npcal%d-z", os.Getpid())
	defer exec.Command("ip", "netns", "del", a).Run() //nolint:errcheck
	defer exec.Command("ip", "netns", "del", z).Run() //nolint:errcheck
	for _, args := range [][]string{
		{"netns", "add", a}, {"netns", "add", z},
		{"-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", z},
		{"-n", a, "link", "set", "eth0", "up"}, {"-n", z, "link", "set", "eth0", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	c, err := xdpgen.NewCounter(npPPSNodePort)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Attach(z, "eth0", link.XDPDriverMode); err != nil {
		return nil, err
	}
	srcMAC, err := linkMAC(a, "eth0")
	if err != nil {
		return nil, err
	}
	dstMAC, err := linkMAC(z, "eth0")
	if err != nil {
		return nil, err
	}
	var ifindex int
	if err := xdpgen.InNetns(a, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err == nil {
			ifindex = ifi.Index
		}
		return err
	}); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, fam := range fams {
		src, dst := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
		if fam == "IPv6" {
			src, dst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
		}
		g, err := xdpgen.NewGenerator(xdpgen.Frame{SrcMAC: srcMAC, DstMAC: dstMAC, Src: src, Dst: dst,
			SrcPort: npSrcPortBase, Ports: npSrcPorts, DstPort: npPPSNodePort})
		if err != nil {
			return nil, err
		}
		n0, err := c.Count()
		if err == nil {
			var el time.Duration
			if el, err = sendFor(a, ifindex, g, d); err == nil {
				var n1 uint64
				if n1, err = c.Count(); err == nil {
					out[fam] = float64(n1-n0) / el.Seconds()
				}
			}
		}
		g.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// close stops kube-proxy (its rules removed), the API server, the
// programs and the sandbox. It runs once, from the deferred call or the
// signal handler.
func (b *nodePortBench) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	if b.kp != nil {
		_ = b.kp.stop()
	}
	if b.env != nil {
		b.env.Stop()
	}
	for _, g := range b.gens {
		g.Close()
	}
	if b.counter != nil {
		b.counter.Close()
	}
	if b.underlay != nil {
		b.underlay.Close()
	}
	name := b.cfg.Sandbox
	if b.sb != nil {
		name = b.sb.Config.Name
	}
	_ = sandbox.Down(name, b.cfg.Log)
}

// onInterrupt makes Ctrl-C or SIGTERM clean up before the process exits.
func (b *nodePortBench) onInterrupt() func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(b.cfg.Log, "%s: cleaning up\n", s)
			b.close()
			os.RemoveAll(b.tmp) // os.Exit skips RunNodePort's deferred removal
			os.Exit(130)
		case <-done:
		}
	}()
	return func() { signal.Stop(sig); close(done) }
}
