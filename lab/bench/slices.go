package bench

// The network-slices benchmark (issue 31, `netcube-lab bench slices`):
// does a latency-class pod keep its latency while bulk pods saturate the
// node's uplink, do rate-limited slices get their rate, and what does the
// node lose in total throughput for it? Against the same node without
// slices, and against the real kube-proxy (iptables mode) serving the
// Service.
//
// One sandbox, two nodes, native routing, the agents run with
// --uplink-rate (the HTB root's rate: a veth never queues, so without it
// no queue would form at the uplink). Four pods a node:
//
//	node1: n1p1 latency client   n1p2 bulk-a (throughput, 30% of the uplink)
//	       n1p3 bulk-b (throughput, 20% of the uplink)   n1p4 best effort (no slice, no rate)
//	node2: n2p1 latency server (ncperf, behind a ClusterIP Service)
//	       n2p2..n2p4 the iperf3 servers of n1p2..n1p4
//
// The latency client runs request/response (ncperf rr: one connection,
// 1 byte each way) to the Service's ClusterIP, idle and while the three
// bulk pods each run iperf3 -P 4 to their server on node2: the bulk all
// crosses node1's uplink, more than it can carry. Modes, back to back in
// each run:
//
//   - slices: NetworkSlices put the latency pair in the latency class and
//     bulk-a, bulk-b in rate-limited throughput slices; netcube queues the
//     uplink with its HTB classes.
//   - slices-off: no slice, no rate, so netcube installs no qdisc; the
//     bench puts an HTB with one class at the same rate on node1's uplink
//     (the same shaper and the same leaf FIFO as netcube's classes, with
//     nothing to tell the latency packets apart): a NIC of that rate.
//   - kube-proxy-iptables: the real kube-proxy (iptables mode, nft
//     backend) serves the Service on node1, with the same one-class
//     shaper. netcube's datapath cannot leave a Service to kube-proxy on a
//     node it runs (its tc programs masquerade a pod's packets to an
//     address outside the cluster and send them to the FIB's next hop
//     past netfilter, and hand replies straight to the pod past conntrack,
//     so kube-proxy's DNAT is never undone), so node1's agent is stopped
//     and its pins removed for the mode, as bench compare does: node1's
//     kernel routes its pods (the routes netcube installed stay), node2
//     keeps netcube. kube-proxy reads a real kube-apiserver and etcd the
//     bench runs on node1's loopback; the agents stay in manifest mode,
//     where NetworkSlices are read.
//   - htb-tc, a reference: no slice; the bench makes netcube's HTB
//     classes itself and classifies with tc u32 filters. The latency
//     class's tail under load is then the kernel's HTB on this machine:
//     where slices mode matches it, netcube's classification adds
//     nothing to it.
//
// Each at 1 and 10,000 Services (the measured one and fillers, IPv4, one
// endpoint each, in netcube's manifests and in the API server alike).
// Pinned: the latency client and server to CPU 1, every iperf3 to CPU 0.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/netcube/netcube/lab/bench/native"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// SlicesConfig configures `netcube-lab bench slices`.
type SlicesConfig struct {
	Runs       int
	Duration   time.Duration // of each latency measurement (the bulk runs around it)
	Services   []int         // Services in the cluster, the measured one included; ascending
	UplinkRate string        // the agents' --uplink-rate, and the shaper's rate in the other modes
	Modes      []string      // default: SlicesModes
	BinDir     string
	ToolsDir   string // kube-proxy, kube-apiserver, etcd
	OutDir     string // slices.{json,md} and the plots; "": none
	Log        io.Writer
	Command    string // how the report says to reproduce it
	Sandbox    string // default "slb"
}

// The modes.
const (
	SlicesOn        = "slices"
	SlicesOff       = "slices-off"
	SlicesKubeProxy = "kube-proxy-iptables"
	// SlicesHTBRef is a reference: netcube's HTB
	// classes made by hand with tc, packets classified by u32 filters on
	// their source, no NetworkSlice. With the latency class's tail as in
	// slices mode, what is left of it is the kernel's HTB on this
	// machine, not netcube's classification.
	SlicesHTBRef = "htb-tc"
)

// SlicesModes are the modes, in the order each run measures them.
var SlicesModes = []string{SlicesOn, SlicesOff, SlicesKubeProxy, SlicesHTBRef}

// SlicesReport is slices.json.
type SlicesReport struct {
	Commit     string            `json:"commit"`
	MeasuredAt time.Time         `json:"measured_at"`
	Machine    map[string]string `json:"machine"`
	Command    string            `json:"command"`
	Runs       int               `json:"runs"`
	DurationS  float64           `json:"duration_s"`
	UplinkRate uint64            `json:"uplink_rate_bits"`
	Modes      []string          `json:"modes"`
	Bulk       []SliceBulkPod    `json:"bulk_pods"`
	Points     []SlicesPoint     `json:"points"`
}

// SliceBulkPod is one bulk pod as configured: its slice and rate.
type SliceBulkPod struct {
	Pod    string `json:"pod"`
	Server string `json:"server"`
	Slice  string `json:"slice"` // "": none (best effort)
	Class  string `json:"class"`
	Rate   uint64 `json:"rate_bits,omitempty"` // 0: none
}

// SlicesPoint is one mode at one number of Services, every run.
type SlicesPoint struct {
	Services int         `json:"services"`
	Mode     string      `json:"mode"`
	Runs     []SlicesRun `json:"runs"`
}

// SlicesRun is one run of a mode: the latency idle and loaded, and what
// the bulk pods got meanwhile.
type SlicesRun struct {
	Idle   native.Result `json:"idle"`
	Loaded native.Result `json:"loaded"`
	Bulk   []SliceBulk   `json:"bulk"`
	// GoodputMbps: the bulk pods' goodput summed (iperf3, received).
	GoodputMbps float64 `json:"node_goodput_mbps"`
	// UplinkMbps: what node1's uplink sent during the loaded latency
	// measurement (its tx bytes: frames without FCS), every packet.
	UplinkMbps float64 `json:"uplink_tx_mbps"`
	// RootMbps: what the uplink's HTB root class sent meanwhile (every
	// mode has one), as HTB counts it (every segment's headers): what it
	// holds to --uplink-rate.
	RootMbps float64 `json:"htb_root_mbps"`
	// LatencyQueueMbps: what the latency class's own transmit queue of the
	// uplink sent meanwhile (slices: netcube's qdisc 4e4c:, outside the
	// HTB and its rate).
	LatencyQueueMbps float64 `json:"latency_queue_mbps,omitempty"`
	// KubeProxySyncS: kube-proxy start -> the Service answers (its rules
	// are restored all at once, the fillers' included).
	KubeProxySyncS float64 `json:"kube_proxy_sync_s,omitempty"`
	KubeProxyRules int     `json:"kube_proxy_rules,omitempty"`
}

// SliceBulk is what one bulk pod got in a run.
type SliceBulk struct {
	Pod         string  `json:"pod"`
	GoodputMbps float64 `json:"goodput_mbps"` // iperf3, received, the omitted first second excluded
	Retransmits int64   `json:"retransmits"`
	// ShapedMbps: the bytes its HTB rate class sent during the loaded
	// latency measurement, as the shaper counts them (IP packet and
	// Ethernet header): what its rate limits. Rate-limited slices only.
	ShapedMbps float64 `json:"shaped_mbps,omitempty"`
}

const (
	slicesRRPort    = 7000 // ncperf's server in the latency server pod
	slicesIperfPort = 5301
	slicesVIPPort   = 80
	// omit: iperf3's first second (slow start) is left out of its
	// figures; the latency measurement starts a second later still.
	slicesOmit  = time.Second
	slicesRamp  = 2 * time.Second
	slicesAfter = time.Second // the bulk runs this long after the latency measurement
	// shaperHandle is the one-class HTB of the modes without slices.
	shaperHandle = 0x00010000
)

// RunSlices runs the benchmark and writes its report (after every number
// of Services: a run that fails later keeps what it has).
func RunSlices(cfg SlicesConfig) (*SlicesReport, error) {
	if len(cfg.Modes) == 0 {
		cfg.Modes = SlicesModes
	}
	for _, m := range cfg.Modes {
		if !slices.Contains(SlicesModes, m) {
			return nil, fmt.Errorf("mode %q: want one of %s", m, strings.Join(SlicesModes, ", "))
		}
	}
	if cfg.Sandbox == "" {
		cfg.Sandbox = "slb"
	}
	if cfg.Runs < 1 || cfg.Duration <= 0 || len(cfg.Services) == 0 || !slices.IsSorted(cfg.Services) || cfg.Services[0] < 1 {
		return nil, errors.New("bench slices: --runs ≥ 1, --duration > 0 and --services ascending, each ≥ 1")
	}
	rate, err := parseRate(cfg.UplinkRate)
	if err != nil {
		return nil, fmt.Errorf("--uplink-rate: %w", err)
	}
	agent := filepath.Join(cfg.BinDir, "netcube-agent")
	if out, _ := exec.Command(agent, "-h").CombinedOutput(); !strings.Contains(string(out), "-uplink-rate") {
		return nil, fmt.Errorf("%s has no --uplink-rate: rebuild it (make build)", agent)
	}
	tmp, err := os.MkdirTemp("", "netcube-slices-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ncperf, err := native.Build(tmp)
	if err != nil {
		return nil, err
	}
	rep := &SlicesReport{Commit: Commit(), MeasuredAt: time.Now().UTC(), Machine: machine(cfg.ToolsDir), Command: cfg.Command,
		Runs: cfg.Runs, DurationS: cfg.Duration.Seconds(), UplinkRate: rate, Modes: cfg.Modes}

	b := &slicesBench{cfg: cfg, rate: rate, ncperf: ncperf, tmp: tmp}
	defer b.close()
	stopSignals := b.onInterrupt()
	defer stopSignals()
	if err := b.up(); err != nil {
		return nil, err
	}
	rep.Bulk = b.bulkPods()
	start := time.Now()
	for _, n := range cfg.Services {
		fmt.Fprintf(cfg.Log, "== %s (%s elapsed)\n", servicesLabel(n), time.Since(start).Round(time.Second))
		if err := b.grow(n); err != nil {
			return rep, err
		}
		points := map[string]*SlicesPoint{}
		for _, mode := range cfg.Modes {
			rep.Points = append(rep.Points, SlicesPoint{Services: n, Mode: mode})
		}
		for i := range rep.Points {
			if rep.Points[i].Services == n {
				points[rep.Points[i].Mode] = &rep.Points[i]
			}
		}
		for run := 1; run <= cfg.Runs; run++ {
			for _, mode := range cfg.Modes {
				fmt.Fprintf(cfg.Log, "  run %d/%d %s\n", run, cfg.Runs, mode)
				r, err := b.measure(mode)
				if err != nil {
					err = fmt.Errorf("%s at %d Services, run %d: %w", mode, n, run, err)
					if cfg.OutDir != "" && rep.measured() { // what was measured is kept
						err = errors.Join(err, rep.Write(cfg.OutDir))
					}
					return rep, err
				}
				points[mode].Runs = append(points[mode].Runs, r)
			}
		}
		if cfg.OutDir != "" {
			if err := rep.Write(cfg.OutDir); err != nil {
				return rep, err
			}
		}
	}
	fmt.Fprintf(cfg.Log, "== done in %s\n", time.Since(start).Round(time.Second))
	return rep, nil
}

// parseRate reads a rate in bits per second ("1G").
func parseRate(s string) (uint64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	v, ok := q.AsInt64()
	if !ok || v < 1e6 {
		return 0, fmt.Errorf("%q: want a whole number of bits per second, at least 1M", s)
	}
	return uint64(v), nil
}

// slicesBench is the benchmark's sandbox and what runs in it.
type slicesBench struct {
	cfg    SlicesConfig
	rate   uint64
	ncperf string
	tmp    string

	mu        sync.Mutex // close may run from the signal handler
	sb        *sandbox.Sandbox
	env       *kubeenv.Env
	kp        *KubeProxy // running kube-proxy, if any
	node1     sandbox.Node
	client    sandbox.Pod // latency client
	server    sandbox.Pod // latency server
	bulk      []bulkPod
	fillers   int  // filler Services so far (in netcube's manifests and the API server)
	agentDown bool // node1's agent stopped and unpinned (kube-proxy mode)
	closed    bool
}

// bulkPod is a bulk client, its server, and its slice.
type bulkPod struct {
	client, server sandbox.Pod
	slice, class   string
	share          float64 // of the uplink's rate: its slice's egressRate (0: none)
}

func (p bulkPod) rate(uplink uint64) uint64 { return uint64(math.Round(p.share * float64(uplink))) }

func (b *slicesBench) bulkPods() []SliceBulkPod {
	var out []SliceBulkPod
	for _, p := range b.bulk {
		out = append(out, SliceBulkPod{Pod: p.client.Name, Server: p.server.Name, Slice: p.slice, Class: p.class, Rate: p.rate(b.rate)})
	}
	return out
}

// up starts the sandbox, the servers, and the API server for kube-proxy.
func (b *slicesBench) up() error {
	empty := filepath.Join(b.tmp, "manifests") // no example Services: only the benchmark's
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return err
	}
	_ = sandbox.Down(b.cfg.Sandbox, io.Discard)
	fmt.Fprintf(b.cfg.Log, "sandbox %s: 2 nodes x 4 pods, native routing, agents --uplink-rate %s\n", b.cfg.Sandbox, b.cfg.UplinkRate)
	var log strings.Builder
	sb, err := sandbox.Up(sandbox.Config{Name: b.cfg.Sandbox, Nodes: 2, PodsPerNode: 4, SocketLB: true, Routing: "native",
		BinDir: b.cfg.BinDir, Manifests: empty, AgentArgs: []string{"--uplink-rate", b.cfg.UplinkRate}}, &log)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, log.String())
	}
	b.mu.Lock()
	b.sb = sb
	b.mu.Unlock()
	n1, n2 := sb.Topology.Nodes[0], sb.Topology.Nodes[1]
	b.node1, b.client, b.server = n1, n1.Pods[0], n2.Pods[0]
	b.bulk = []bulkPod{
		{client: n1.Pods[1], server: n2.Pods[1], slice: "bulk-a", class: "throughput", share: 0.3},
		{client: n1.Pods[2], server: n2.Pods[2], slice: "bulk-b", class: "throughput", share: 0.2},
		{client: n1.Pods[3], server: n2.Pods[3], class: "best-effort"},
	}
	// Clients: connections come and go fast (the reachability probes).
	for _, p := range n1.Pods {
		if out, err := exec.Command("ip", "netns", "exec", p.Netns, "sysctl", "-q", "-w",
			"net.ipv4.tcp_tw_reuse=1", "net.ipv4.ip_local_port_range=1024 65000").CombinedOutput(); err != nil {
			return fmt.Errorf("%s sysctls: %v: %s", p.Name, err, out)
		}
	}
	type server struct {
		pod sandbox.Pod
		cmd *exec.Cmd
	}
	servers := []server{{b.server, exec.Command("taskset", "-c", "1", b.ncperf, "serve", strconv.Itoa(slicesRRPort))}}
	for _, p := range b.bulk {
		servers = append(servers, server{p.server, exec.Command("taskset", "-c", "0", "iperf3", "-s", "-p", strconv.Itoa(slicesIperfPort))})
	}
	for _, s := range servers {
		if err := sb.Start(s.pod.Name, s.cmd); err != nil {
			return err
		}
		go func() { _ = s.cmd.Wait() }() // sandbox down kills them
	}
	if err := sb.Topology.WriteManifest("latency.yaml", b.serviceYAML()); err != nil {
		return err
	}
	if err := b.waitService("netcube", time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(b.cfg.Log, "  kube-apiserver and etcd on %s's loopback (kube-proxy's)\n", n1.Name)
	env, err := kubeenv.Start(kubeenv.Options{Dir: filepath.Join(b.tmp, "kube"), Netns: n1.Netns, ToolsDir: b.cfg.ToolsDir})
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.env = env
	b.mu.Unlock()
	return b.apiObjects()
}

// close stops kube-proxy (its rules removed), the API server and the
// sandbox. It runs once, from the deferred call or the signal handler.
func (b *slicesBench) close() {
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
	if b.sb != nil {
		_ = sandbox.Down(b.sb.Config.Name, b.cfg.Log)
	} else {
		_ = sandbox.Down(b.cfg.Sandbox, io.Discard)
	}
}

// onInterrupt makes Ctrl-C or SIGTERM clean up before the process exits.
func (b *slicesBench) onInterrupt() func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(b.cfg.Log, "%s: cleaning up\n", s)
			b.close()
			os.RemoveAll(b.tmp) // os.Exit skips RunSlices' deferred removal
			os.Exit(130)
		case <-done:
		}
	}()
	return func() { signal.Stop(sig); close(done) }
}

// serviceYAML is the measured Service in netcube's manifests: its
// ClusterIP's port 80 to ncperf on the latency server.
func (b *slicesBench) serviceYAML() string {
	ports := []sandbox.PortSpec{{Name: "rr", Port: slicesVIPPort, Protocol: "TCP", TargetPort: strconv.Itoa(slicesRRPort)}}
	epPorts := []sandbox.PortSpec{{Name: "rr", Port: slicesRRPort, Protocol: "TCP"}}
	return sandbox.ServiceYAML("latency", benchIPs, ports) + "---\n" +
		sandbox.SliceYAML("latency", false, epPorts, []sandbox.Pod{b.server}) + "---\n" +
		sandbox.SliceYAML("latency", true, epPorts, []sandbox.Pod{b.server})
}

// apiObjects creates, in the API server, what kube-proxy needs: the
// nodes (their addresses) and the measured Service with its endpoint.
func (b *slicesBench) apiObjects() error {
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
	svc := measuredService("latency", benchIPs, corev1.ServiceTypeClusterIP, []corev1.ServicePort{
		{Name: "rr", Port: slicesVIPPort, TargetPort: intstr.FromInt32(slicesRRPort)}})
	if _, err := api.CoreV1().Services(benchNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	port, name := int32(slicesRRPort), "rr"
	for _, fam := range bothFamilies {
		addr := b.server.IP4.String()
		if fam == discoveryv1.AddressTypeIPv6 {
			addr = b.server.IP6.String()
		}
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "latency-" + strings.ToLower(string(fam)), Namespace: benchNS,
				Labels: map[string]string{discoveryv1.LabelServiceName: "latency"}},
			AddressType: fam,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: &b.server.Node,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: benchNS, Name: b.server.Name}}},
		}
		if _, err := api.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// grow makes the cluster n Services: n-1 fillers (sync.go's: IPv4
// ClusterIPs from 10.96.1.0, one endpoint nothing answers on) beside the
// measured one, in netcube's manifests (one file; both agents restarted
// on their pins, so that their ready file says every Service is in) and
// in the API server (written to etcd directly, as bench sync and compare
// do).
func (b *slicesBench) grow(n int) error {
	want := n - 1
	if want <= b.fillers {
		return nil
	}
	t0 := time.Now()
	var doc strings.Builder
	for i := range want {
		for _, obj := range []any{withType(benchService(i), "v1", "Service"), withType(benchSlice(i, 1, 0), "discovery.k8s.io/v1", "EndpointSlice")} {
			y, err := yaml.Marshal(obj)
			if err != nil {
				return err
			}
			doc.WriteString("---\n")
			doc.Write(y)
		}
	}
	if err := b.sb.Topology.WriteManifest("fillers.yaml", doc.String()); err != nil {
		return err
	}
	for _, node := range b.sb.Topology.Nodes {
		if err := b.sb.StopAgent(node.Name, false); err != nil {
			return err
		}
		if err := b.sb.StartAgent(node.Name); err != nil {
			return err
		}
	}
	fmt.Fprintf(b.cfg.Log, "  %d filler Services in netcube's manifests, both agents restarted and synced (%s)\n", want, time.Since(t0).Round(100*time.Millisecond))
	t0 = time.Now()
	const chunk = 5000
	for lo := b.fillers; lo < want; lo += chunk {
		var objs []kubeenv.StoredObject
		for i := lo; i < min(lo+chunk, want); i++ {
			svc := benchService(i)
			objs = append(objs,
				kubeenv.StoredObject{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: svc},
				kubeenv.StoredObject{Resource: networkingv1.Resource("ipaddresses"), Version: networkingv1.SchemeGroupVersion, Object: clusterIPAddress(svc)},
				kubeenv.StoredObject{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: benchSlice(i, 1, 0)})
		}
		if err := b.env.StoreDirect(context.Background(), objs); err != nil {
			return err
		}
	}
	if err := waitListed(b.env.Client, want+2); err != nil { // + kubernetes, latency
		return err
	}
	fmt.Fprintf(b.cfg.Log, "  and in the API server (%s)\n", time.Since(t0).Round(100*time.Millisecond))
	b.fillers = want
	return b.waitService("netcube", time.Minute)
}

// withType gives an object its apiVersion and kind, for a manifest.
func withType(obj any, apiVersion, kind string) any {
	tm := metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
	switch o := obj.(type) {
	case *corev1.Service:
		o.TypeMeta = tm
	case *discoveryv1.EndpointSlice:
		o.TypeMeta = tm
	}
	return obj
}

// measure runs one mode once: it sets the mode up, measures, and puts
// the node back as it found it (netcube's datapath on node1, no slice, no
// shaper).
func (b *slicesBench) measure(mode string) (r SlicesRun, err error) {
	switch mode {
	case SlicesOn:
		if err := b.setSlices(true); err != nil {
			return r, err
		}
		defer func() { err = errors.Join(err, b.setSlices(false)) }()
	case SlicesOff:
		if err := b.shaper(true); err != nil {
			return r, err
		}
		defer func() { err = errors.Join(err, b.shaper(false)) }()
	case SlicesHTBRef:
		if err := b.tcClasses(true); err != nil {
			return r, errors.Join(err, b.tcClasses(false))
		}
		defer func() { err = errors.Join(err, b.tcClasses(false)) }()
	case SlicesKubeProxy:
		if err := b.kubeProxy(true, &r); err != nil {
			return r, errors.Join(err, b.kubeProxy(false, nil))
		}
		defer func() { err = errors.Join(err, b.kubeProxy(false, nil)) }()
	}
	if r.Idle, err = b.latency(b.cfg.Duration); err != nil {
		return r, fmt.Errorf("idle: %w", err)
	}
	fmt.Fprintf(b.cfg.Log, "    idle:   %s\n", latencyLine(r.Idle))
	if err := b.loaded(mode, &r); err != nil {
		return r, fmt.Errorf("loaded: %w", err)
	}
	fmt.Fprintf(b.cfg.Log, "    loaded: %s\n", latencyLine(r.Loaded))
	var parts []string
	for i, p := range b.bulk {
		s := fmt.Sprintf("%s %.1f", p.client.Name, r.Bulk[i].GoodputMbps)
		if r.Bulk[i].ShapedMbps > 0 {
			s += fmt.Sprintf(" (shaped %.1f of %.0f)", r.Bulk[i].ShapedMbps, float64(p.rate(b.rate))/1e6)
		}
		parts = append(parts, s)
	}
	fmt.Fprintf(b.cfg.Log, "    bulk:   %s; node %.1f Mbit/s goodput; uplink sent %.1f Mbit/s, its HTB root %.1f\n", strings.Join(parts, ", "), r.GoodputMbps, r.UplinkMbps, r.RootMbps)
	return r, nil
}

func latencyLine(r native.Result) string {
	return fmt.Sprintf("p50 %.1fµs p99 %.1fµs p99.9 %.1fµs max %.0fµs stddev %.1fµs (%.0f/s)", r.P50, r.P99, r.P999, r.Max, r.Stddev, r.PerSec)
}

// slicesYAML: the latency pair in the latency class; bulk-a and bulk-b
// throughput slices with their rates. The best-effort pod is in none.
func (b *slicesBench) slicesYAML() string {
	var s strings.Builder
	fmt.Fprintf(&s, `apiVersion: netcube.io/v1alpha1
kind: NetworkSlice
metadata: {name: latency}
spec:
  class: latency
  podSelector: {matchExpressions: [{key: pod, operator: In, values: [%s, %s]}]}
`, b.client.Name, b.server.Name)
	for _, p := range b.bulk {
		if p.slice == "" {
			continue
		}
		fmt.Fprintf(&s, `---
apiVersion: netcube.io/v1alpha1
kind: NetworkSlice
metadata: {name: %s}
spec:
  class: %s
  egressRate: "%d"
  podSelector: {matchLabels: {pod: %s}}
`, p.slice, p.class, p.rate(b.rate), p.client.Name)
	}
	return s.String()
}

// setSlices applies (or deletes) the NetworkSlices and waits for node1's
// uplink to have (or no longer have) netcube's HTB with the rate classes.
func (b *slicesBench) setSlices(on bool) error {
	if !on {
		if err := os.Remove(filepath.Join(b.sb.Topology.ManifestDir(), "slices.yaml")); err != nil {
			return err
		}
		for _, n := range b.sb.Topology.Nodes {
			if !waitUntil(20*time.Second, 50*time.Millisecond, func() bool { q, _ := rootQdisc(n); return q == "" }) {
				q, _ := rootQdisc(n)
				return fmt.Errorf("%s's uplink keeps %s after the slices are deleted", n.Name, q)
			}
		}
		return nil
	}
	if q, err := rootQdisc(b.node1); err != nil || q != "" {
		return fmt.Errorf("%s's uplink has a root qdisc (%s) before the slices: %v", b.node1.Name, q, err)
	}
	if err := b.sb.Topology.WriteManifest("slices.yaml", b.slicesYAML()); err != nil {
		return err
	}
	ok := waitUntil(20*time.Second, 50*time.Millisecond, func() bool {
		if !netcubeHTB(b.node1) {
			return false
		}
		for _, p := range b.bulk {
			if p.slice != "" {
				if _, ok := b.rateClass(p); !ok {
					return false
				}
			}
		}
		return true
	})
	if !ok {
		q, _ := rootQdisc(b.node1)
		return fmt.Errorf("no netcube HTB with the slices' rate classes on %s's uplink after 20s (root qdisc: %q)", b.node1.Name, q)
	}
	return nil
}

// datapathQosHandle is netcube's HTB on an uplink (pkg/cubes/qos's
// prioHandle, "NC"), datapathLatencyHandle the latency class's own
// queue's qdisc beside it on a multi-queue uplink (latencyHandle, "NL").
const (
	datapathQosHandle     = 0x4e430000
	datapathLatencyHandle = 0x4e4c0000
)

// uplink opens a node's network namespace for netlink, and its eth0.
func uplink(n sandbox.Node) (*netlink.Handle, netlink.Link, func(), error) {
	h, done, err := n.Netlink()
	if err != nil {
		return nil, nil, nil, err
	}
	link, err := h.LinkByName("eth0")
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return h, link, done, nil
}

// rootQdisc names the root qdisc of a node's uplink ("htb 4e43:"), ""
// for the kernel's default (none: a veth has no queue).
func rootQdisc(n sandbox.Node) (string, error) {
	h, link, done, err := uplink(n)
	if err != nil {
		return "", err
	}
	defer done()
	qs, err := h.QdiscList(link)
	if err != nil {
		return "", err
	}
	for _, q := range qs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT && q.Type() != "noqueue" {
			return fmt.Sprintf("%s %x:", q.Type(), a.Handle>>16), nil
		}
	}
	return "", nil
}

// netcubeHTB tells whether a node's uplink has netcube's HTB: at the
// root, or under an mq root beside the latency class's own queue.
func netcubeHTB(n sandbox.Node) bool {
	h, link, done, err := uplink(n)
	if err != nil {
		return false
	}
	defer done()
	qs, err := h.QdiscList(link)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(qs, func(q netlink.Qdisc) bool { return q.Type() == "htb" && q.Attrs().Handle == datapathQosHandle })
}

// qdiscSent is the bytes the qdisc of that handle on a node's uplink has
// sent, 0 when there is none.
func qdiscSent(n sandbox.Node, handle uint32) (uint64, error) {
	h, link, done, err := uplink(n)
	if err != nil {
		return 0, err
	}
	defer done()
	qs, err := h.QdiscList(link)
	if err != nil {
		return 0, err
	}
	for _, q := range qs {
		if a := q.Attrs(); a.Handle == handle && a.Statistics != nil && a.Statistics.Basic != nil {
			return a.Statistics.Basic.Bytes, nil
		}
	}
	return 0, nil
}

// classStats is one HTB class of node1's uplink.
type classStats struct {
	rateBits uint64
	bytes    uint64
}

// uplinkClasses lists the HTB classes of node1's uplink, by handle.
func (b *slicesBench) uplinkClasses() (map[uint32]classStats, error) {
	h, link, done, err := uplink(b.node1)
	if err != nil {
		return nil, err
	}
	defer done()
	cs, err := h.ClassList(link, 0)
	if err != nil {
		return nil, err
	}
	out := map[uint32]classStats{}
	for _, c := range cs {
		htb, ok := c.(*netlink.HtbClass)
		if !ok {
			continue
		}
		s := classStats{rateBits: htb.Rate * 8}
		if st := htb.Attrs().Statistics; st != nil && st.Basic != nil {
			s.bytes = st.Basic.Bytes
		}
		out[htb.Handle] = s
	}
	return out, nil
}

// rateClass finds the HTB class of a rate-limited bulk pod's slice: the
// one of netcube's classes with its rate (the bench gives each slice a
// rate of its own; the class classes run at the uplink's rate or 1% of
// it).
func (b *slicesBench) rateClass(p bulkPod) (uint32, bool) {
	cs, err := b.uplinkClasses()
	if err != nil {
		return 0, false
	}
	want := float64(p.rate(b.rate))
	for handle, c := range cs {
		if handle>>16 == datapathQosHandle>>16 && math.Abs(float64(c.rateBits)-want) <= 0.01*want {
			return handle, true
		}
	}
	return 0, false
}

// shaper puts (or removes) the one-class HTB at the uplink's rate on
// node1's uplink: the queueing of the modes without slices. Its class is
// made as netcube makes its own (the same defaults for burst and leaf
// queue), so the modes differ only in the classes.
func (b *slicesBench) shaper(on bool) error {
	h, link, done, err := uplink(b.node1)
	if err != nil {
		return err
	}
	defer done()
	qd := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: shaperHandle})
	if !on {
		return h.QdiscDel(qd)
	}
	if q, err := rootQdisc(b.node1); err != nil || q != "" {
		return fmt.Errorf("%s's uplink has a root qdisc (%s) before the shaper: %v", b.node1.Name, q, err)
	}
	qd.Defcls = 1
	if err := h.QdiscReplace(qd); err != nil {
		return fmt.Errorf("shaper: %w", err)
	}
	c := netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: link.Attrs().Index, Parent: shaperHandle, Handle: shaperHandle | 1},
		netlink.HtbClassAttrs{Rate: b.rate, Ceil: b.rate})
	if err := h.ClassReplace(c); err != nil {
		_ = h.QdiscDel(qd)
		return fmt.Errorf("shaper class: %w", err)
	}
	return nil
}

// The reference's classes: netcube's layout (pkg/cubes/qos), handle 1:.
const (
	tcRoot, tcLatency, tcBest, tcBulk = 1, 0x10, 0x20, 0x30
)

// tcRateClass is the reference's rate class of bulk pod i.
func tcRateClass(i int) uint32 { return shaperHandle | uint32(0x40+i) }

// tcClasses makes (or removes) the reference mode's queueing on both
// uplinks, as netcube's HTB mode makes it for the slices (the classes
// made with netlink as netcube does, so with its defaults): a root at the
// uplink's rate; the latency class at HTB priority 0, guaranteed that
// rate; best effort (the default) and bulk at 1% and priorities 1 and 2,
// borrowing up to it; a class per rate, its rate as guarantee and
// ceiling, priority 2. u32 filters classify by source address: the
// latency pair (node1: the client; node2: the server) and the
// rate-limited bulk pods.
func (b *slicesBench) tcClasses(on bool) error {
	nodes := b.sb.Topology.Nodes
	if !on {
		var errs []error
		for _, n := range nodes {
			if q, _ := rootQdisc(n); q == fmt.Sprintf("htb %x:", shaperHandle>>16) {
				errs = append(errs, tcDo(n, "qdisc", "del", "dev", "eth0", "root"))
			}
		}
		return errors.Join(errs...)
	}
	for _, n := range nodes {
		if q, err := rootQdisc(n); err != nil || q != "" {
			return fmt.Errorf("%s's uplink has a root qdisc (%s) before the reference's: %v", n.Name, q, err)
		}
		h, link, done, err := uplink(n)
		if err != nil {
			return err
		}
		idx := link.Attrs().Index
		qd := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: shaperHandle})
		qd.Defcls = tcBest
		err = h.QdiscReplace(qd)
		class := func(minor, parent uint32, rate, ceil uint64, prio uint32) {
			if err == nil {
				err = h.ClassReplace(netlink.NewHtbClass(netlink.ClassAttrs{LinkIndex: idx, Parent: parent, Handle: shaperHandle | minor},
					netlink.HtbClassAttrs{Rate: rate, Ceil: ceil, Prio: prio}))
			}
		}
		root := uint32(shaperHandle | tcRoot)
		class(tcRoot, netlink.HANDLE_ROOT, b.rate, b.rate, 0)
		class(tcLatency, root, b.rate, b.rate, 0)
		class(tcBest, root, b.rate/100, b.rate, 1)
		class(tcBulk, root, b.rate/100, b.rate, 2)
		for i, p := range b.bulk {
			if p.slice != "" && n.Name == p.client.Node {
				class(tcRateClass(i)&0xffff, root, p.rate(b.rate), p.rate(b.rate), 2)
			}
		}
		done()
		if err != nil {
			return fmt.Errorf("%s: the reference's classes: %w", n.Name, err)
		}
		filter := func(src sandbox.Pod, class uint32) error {
			return tcDo(n, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
				"match", "ip", "src", src.IP4.String()+"/32", "flowid", fmt.Sprintf("1:%x", class&0xffff))
		}
		for _, p := range []sandbox.Pod{b.client, b.server} {
			if p.Node == n.Name {
				if err := filter(p, tcLatency); err != nil {
					return err
				}
			}
		}
		for i, p := range b.bulk {
			if p.slice != "" && p.client.Node == n.Name {
				if err := filter(p.client, tcRateClass(i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// tcDo runs tc in a node's network namespace.
func tcDo(n sandbox.Node, args ...string) error {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.Netns, "tc"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tc %s on %s: %v: %s", strings.Join(args, " "), n.Name, err, out)
	}
	return nil
}

// kubeProxy sets up (or tears down) the kube-proxy mode: node1's agent
// stopped and its pins removed, the shaper, kube-proxy started and
// serving the Service; undone in the reverse order, node1's agent started
// again on empty pins (a full sync) and serving the Service.
func (b *slicesBench) kubeProxy(on bool, r *SlicesRun) error {
	node1 := &netcubePeer{sb: b.sb, node: b.node1}
	if !on {
		var errs []error
		b.mu.Lock()
		if b.kp != nil {
			errs = append(errs, b.kp.stop())
			b.kp = nil
		}
		b.mu.Unlock()
		if q, _ := rootQdisc(b.node1); q == fmt.Sprintf("htb %x:", shaperHandle>>16) {
			errs = append(errs, b.shaper(false))
		}
		if b.agentDown {
			if err := node1.start(); err != nil {
				return errors.Join(append(errs, err)...)
			}
			b.agentDown = false
			errs = append(errs, b.waitService("netcube", time.Minute))
		}
		return errors.Join(errs...)
	}
	b.agentDown = true
	if err := node1.stop(); err != nil {
		return err
	}
	if err := b.shaper(true); err != nil {
		return err
	}
	kp := &KubeProxy{Mode: KubeProxyModes[0], Node: b.node1, Tools: b.cfg.ToolsDir, Config: b.env.Kubeconfig,
		LogFile: filepath.Join(b.sb.Topology.LogDir(), "kube-proxy.log")}
	t0 := time.Now()
	if err := kp.start(); err != nil {
		return err
	}
	b.mu.Lock()
	b.kp = kp
	b.mu.Unlock()
	if err := b.waitService("kube-proxy", 10*time.Minute); err != nil {
		return err
	}
	r.KubeProxySyncS = time.Since(t0).Seconds()
	var err error
	if r.KubeProxyRules, err = kp.entries(); err != nil {
		return err
	}
	if r.KubeProxyRules < b.fillers {
		return fmt.Errorf("kube-proxy answers with %d rules, fewer than the %d filler Services", r.KubeProxyRules, b.fillers)
	}
	fmt.Fprintf(b.cfg.Log, "    kube-proxy (%s) serves the Service after %.1f s, %d rules\n", kp.Mode.Name, r.KubeProxySyncS, r.KubeProxyRules)
	return nil
}

// waitService waits until the latency client's requests to the
// Service's ClusterIP are answered (by whichever data plane serves it).
func (b *slicesBench) waitService(who string, timeout time.Duration) error {
	var last error
	if waitUntil(timeout, 100*time.Millisecond, func() bool {
		if b.kp != nil && b.kp.Exited() {
			last = errors.New("kube-proxy exited")
			return true
		}
		_, last = b.rr(100 * time.Millisecond)
		return last == nil
	}) && last == nil {
		return nil
	}
	return fmt.Errorf("the Service %s:%d is not answered (%s) after %s: %v", benchIPs[0], slicesVIPPort, who, timeout, last)
}

// rr runs ncperf's request/response from the latency client to the
// Service's ClusterIP, on CPU 1 with its server.
func (b *slicesBench) rr(d time.Duration) (native.Result, error) {
	var r native.Result
	out, err := runIn(b.sb, b.client.Name, exec.Command("taskset", "-c", "1", b.ncperf, "rr", benchIPs[0], strconv.Itoa(slicesVIPPort),
		strconv.FormatFloat(d.Seconds(), 'f', 3, 64)))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("ncperf output %q: %w", out, err)
	}
	if r.Ops == 0 || r.Errors > 0 {
		return r, fmt.Errorf("ncperf rr to %s: %d requests answered, %d errors", benchIPs[0], r.Ops, r.Errors)
	}
	return r, nil
}

func (b *slicesBench) latency(d time.Duration) (native.Result, error) { return b.rr(d) }

// loaded starts the bulk, measures the latency inside its steady
// window, and collects what the bulk got: iperf3's goodput, and, over the
// latency measurement, the rate classes' bytes and the uplink's.
func (b *slicesBench) loaded(mode string, r *SlicesRun) error {
	secs := int(math.Ceil((slicesRamp - slicesOmit + b.cfg.Duration + slicesAfter).Seconds()))
	type result struct {
		out []byte
		err error
	}
	results := make([]chan result, len(b.bulk))
	for i, p := range b.bulk {
		results[i] = make(chan result, 1)
		cmd := exec.Command("taskset", "-c", "0", "iperf3", "-c", p.server.IP4.String(), "-p", strconv.Itoa(slicesIperfPort),
			"-t", strconv.Itoa(secs), "-O", strconv.Itoa(int(slicesOmit.Seconds())), "-P", "4", "-J")
		go func() {
			out, err := runIn(b.sb, p.client.Name, cmd)
			results[i] <- result{out, err}
		}()
	}
	time.Sleep(slicesRamp)
	classes := map[int]uint32{} // bulk pod -> its rate class
	for i, p := range b.bulk {
		switch {
		case p.slice == "":
		case mode == SlicesOn:
			h, ok := b.rateClass(p)
			if !ok {
				return fmt.Errorf("no HTB class of %s's rate on the uplink", p.slice)
			}
			classes[i] = h
		case mode == SlicesHTBRef:
			classes[i] = tcRateClass(i)
		}
	}
	c0, err := b.uplinkClasses()
	if err != nil {
		return err
	}
	tx0, err := uplinkTxBytes(b.node1)
	if err != nil {
		return err
	}
	lq0, err := qdiscSent(b.node1, datapathLatencyHandle)
	if err != nil {
		return err
	}
	t0 := time.Now()
	var rrErr error
	r.Loaded, rrErr = b.latency(b.cfg.Duration)
	elapsed := time.Since(t0).Seconds()
	c1, err := b.uplinkClasses()
	if err != nil {
		return err
	}
	tx1, err := uplinkTxBytes(b.node1)
	if err != nil {
		return err
	}
	lq1, err := qdiscSent(b.node1, datapathLatencyHandle)
	if err != nil {
		return err
	}
	r.UplinkMbps = float64(tx1-tx0) * 8 / elapsed / 1e6
	r.LatencyQueueMbps = float64(lq1-lq0) * 8 / elapsed / 1e6
	root := uint32(shaperHandle | 1) // the one-class shaper's, the reference's
	if mode == SlicesOn {
		root = datapathQosHandle | 1 // netcube's (pkg/cubes/qos: htbRoot)
	}
	r.RootMbps = float64(c1[root].bytes-c0[root].bytes) * 8 / elapsed / 1e6
	var errs []error
	if rrErr != nil {
		errs = append(errs, rrErr)
	}
	r.Bulk = make([]SliceBulk, len(b.bulk))
	for i, p := range b.bulk {
		res := <-results[i]
		r.Bulk[i].Pod = p.client.Name
		gp, retrans, err := iperfGoodput(res.out)
		if err != nil {
			errs = append(errs, fmt.Errorf("iperf3 %s -> %s: %v %w", p.client.Name, p.server.Name, res.err, err))
			continue
		}
		r.Bulk[i].GoodputMbps, r.Bulk[i].Retransmits = gp/1e6, retrans
		r.GoodputMbps += gp / 1e6
		if h, ok := classes[i]; ok {
			r.Bulk[i].ShapedMbps = float64(c1[h].bytes-c0[h].bytes) * 8 / elapsed / 1e6
		}
	}
	return errors.Join(errs...)
}

// iperfGoodput reads iperf3's JSON: what the receiver got (bits/s), and
// the sender's retransmissions.
func iperfGoodput(out []byte) (float64, int64, error) {
	var ip struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
			SumSent struct {
				Retransmits int64 `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &ip); err != nil {
		return 0, 0, fmt.Errorf("iperf3 output: %w", err)
	}
	if ip.Error != "" {
		return 0, 0, errors.New(ip.Error)
	}
	return ip.End.SumReceived.BitsPerSecond, ip.End.SumSent.Retransmits, nil
}

// uplinkTxBytes is what a node's uplink has sent so far.
func uplinkTxBytes(n sandbox.Node) (uint64, error) {
	h, link, done, err := uplink(n)
	if err != nil {
		return 0, err
	}
	defer done()
	l, err := h.LinkByIndex(link.Attrs().Index)
	if err != nil {
		return 0, err
	}
	if s := l.Attrs().Statistics; s != nil {
		return s.TxBytes, nil
	}
	return 0, errors.New("no link statistics")
}
