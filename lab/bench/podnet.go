package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netcube/netcube/lab/bench/native"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// The pod-network benchmark: netcube's pod network (native routing,
// VXLAN, and the kernel-routed path as a second reference) against
// flannel's VXLAN with the bridge and host-local plugins, on the same
// sandbox topology, all up at once and measured in turn within each run:
// same-node and cross-node pod→pod, IPv4 and IPv6; TCP bulk (1 and 4
// streams, iperf3) and the CPU it costs; request/response latency and
// rate and new connections per second (ncperf, native code); and how long
// a pod's CNI ADD takes.

// PodnetConfig says what to measure.
type PodnetConfig struct {
	BinDir     string   // netcube, netcube-agent, netcube-cni
	FlannelDir string   // hack/build-flannel.sh's output ("": built or found)
	Peers      []string // default: every peer
	Runs       int
	Duration   time.Duration
	Startups   int // pods whose CNI ADD is timed, per peer
	OutDir     string
	Log        io.Writer
	// Sandboxes names each peer's sandbox, in Peers' order (default
	// pn1, pn2, ...).
	Sandboxes []string
}

// Podnet peers.
const (
	PeerNetcubeNative = "netcube-native"
	PeerNetcubeVXLAN  = "netcube-vxlan"
	PeerNetcubeKernel = "netcube-kernel"
	PeerFlannel       = "flannel"
)

// BareVeth names the bare veth pair's points: the reference, not a peer.
const BareVeth = "bare-veth"

// PodnetPeers are the peers, in the report's order.
var PodnetPeers = []string{PeerNetcubeNative, PeerNetcubeVXLAN, PeerNetcubeKernel, PeerFlannel}

// PodnetReport is podnet.json.
type PodnetReport struct {
	RunHeader
	// Points holds every peer's figures, and the bare veth pair's
	// (peer BareVeth, same-node, request/response and new connections).
	Points []PodnetPoint `json:"points"`
	// StartupMs: CNI ADD durations per peer (ms).
	StartupMs map[string][]float64 `json:"startup_ms"`
}

// PodnetPoint is one peer, family and placement, with every run's figures.
type PodnetPoint struct {
	Peer      string          `json:"peer"`
	Family    string          `json:"family"`
	Placement string          `json:"placement"` // same-node, cross-node
	Bulk1     []float64       `json:"bulk1_gbps"`
	Bulk4     []float64       `json:"bulk4_gbps"`
	CPUPerG   []float64       `json:"cpu_s_per_gbit"` // CPU seconds (every CPU, busy) per Gbit, 1 stream
	RR        []native.Result `json:"rr"`
	CRR       []native.Result `json:"crr"`
}

func (p *PodnetPoint) key() string { return p.Peer + " " + p.Family + " " + p.Placement }

const (
	podnetRRPort    = 7000
	podnetIperfPort = 5301
)

// RunPodnet runs the benchmark and writes podnet.{json,md} and plots.
func RunPodnet(cfg PodnetConfig) (*PodnetReport, error) {
	if len(cfg.Peers) == 0 {
		cfg.Peers = PodnetPeers
	}
	for _, p := range cfg.Peers {
		if !slices.Contains(PodnetPeers, p) {
			return nil, fmt.Errorf("peer %q: want one of %s", p, strings.Join(PodnetPeers, ", "))
		}
	}
	tmp, err := os.MkdirTemp("", "netcube-podnet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ncperf, err := native.Build(tmp)
	if err != nil {
		return nil, err
	}
	if slices.Contains(cfg.Peers, PeerFlannel) && cfg.FlannelDir == "" {
		if cfg.FlannelDir, err = FlannelDir(); err != nil {
			return nil, err
		}
	}
	rep := &PodnetReport{StartupMs: map[string][]float64{}, RunHeader: newRunHeader(cfg.Runs, cfg.Duration,
		fmt.Sprintf("netcube-lab bench podnet --runs %d --duration %s --startups %d --peers %s", cfg.Runs, cfg.Duration, cfg.Startups, strings.Join(cfg.Peers, ",")))}

	bare, err := newBarePair(ncperf)
	if err != nil {
		return nil, err
	}
	defer bare.close()

	sbs := map[string]*sandbox.Sandbox{}
	defer func() {
		for _, sb := range sbs {
			_ = sandbox.Down(sb.Config.Name, io.Discard)
		}
	}()
	for i, peer := range cfg.Peers {
		fmt.Fprintf(cfg.Log, "peer %s: sandbox up\n", peer)
		name := fmt.Sprintf("pn%d", i+1)
		if i < len(cfg.Sandboxes) {
			name = cfg.Sandboxes[i]
		}
		sb, err := upPeer(cfg, peer, name)
		if err != nil {
			return nil, fmt.Errorf("peer %s: %w", peer, err)
		}
		sbs[peer] = sb
		if err := preparePeer(sb, ncperf); err != nil {
			return nil, fmt.Errorf("peer %s: %w", peer, err)
		}
	}

	points := map[string]*PodnetPoint{}
	pointOf := func(peer, fam, placement string) *PodnetPoint {
		p := &PodnetPoint{Peer: peer, Family: fam, Placement: placement}
		if have, ok := points[p.key()]; ok {
			return have
		}
		points[p.key()] = p
		return p
	}
	for run := 1; run <= cfg.Runs; run++ {
		for _, fam := range []string{"IPv4", "IPv6"} {
			p := pointOf(BareVeth, fam, "same-node")
			fmt.Fprintf(cfg.Log, "  run %d/%d %-15s %s %-10s ", run, cfg.Runs, BareVeth, fam, "same-node")
			if err := bare.measure(fam, cfg.Duration, p); err != nil {
				return nil, err
			}
			last := len(p.RR) - 1
			fmt.Fprintf(cfg.Log, "rr %.0f/s p50 %.1fµs p99 %.1fµs, %.0f conn/s\n", p.RR[last].PerSec, p.RR[last].P50, p.RR[last].P99, p.CRR[last].PerSec)
		}
		for _, peer := range cfg.Peers {
			sb := sbs[peer]
			client := sb.Topology.Nodes[0].Pods[0]
			targets := []struct {
				placement string
				pod       sandbox.Pod
			}{{"same-node", sb.Topology.Nodes[0].Pods[1]}, {"cross-node", sb.Topology.Nodes[1].Pods[0]}}
			for _, fam := range []string{"IPv4", "IPv6"} {
				for _, tg := range targets {
					addr := tg.pod.IP4
					if fam == "IPv6" {
						addr = tg.pod.IP6
					}
					p := pointOf(peer, fam, tg.placement)
					fmt.Fprintf(cfg.Log, "  run %d/%d %-15s %s %-10s ", run, cfg.Runs, peer, fam, tg.placement)
					if err := measurePodnet(sb, client.Name, addr, ncperf, cfg.Duration, p); err != nil {
						return nil, fmt.Errorf("%s: %w", p.key(), err)
					}
					last := len(p.Bulk1) - 1
					fmt.Fprintf(cfg.Log, "%.2f/%.2f Gbit/s (%.3f CPU-s/Gbit), rr %.0f/s p50 %.1fµs p99 %.1fµs, %.0f conn/s\n",
						p.Bulk1[last], p.Bulk4[last], p.CPUPerG[last], p.RR[last].PerSec, p.RR[last].P50, p.RR[last].P99, p.CRR[last].PerSec)
				}
			}
		}
	}
	for _, peer := range append([]string{BareVeth}, cfg.Peers...) {
		for _, fam := range []string{"IPv4", "IPv6"} {
			for _, pl := range []string{"same-node", "cross-node"} {
				if p, ok := points[peer+" "+fam+" "+pl]; ok {
					rep.Points = append(rep.Points, *p)
				}
			}
		}
	}
	for _, peer := range cfg.Peers {
		fmt.Fprintf(cfg.Log, "peer %s: timing %d pod startups (CNI ADD)\n", peer, cfg.Startups)
		ds, err := sbs[peer].TimePodStartups(sbs[peer].Topology.Nodes[0].Name, cfg.Startups)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			rep.StartupMs[peer] = append(rep.StartupMs[peer], float64(d.Microseconds())/1000)
		}
	}
	return rep, rep.write(cfg.OutDir)
}

// upPeer starts a peer's sandbox: netcube with its pod network (manifest
// mode, no Service in the way), or flannel on a real API server.
func upPeer(cfg PodnetConfig, peer, name string) (*sandbox.Sandbox, error) {
	c := sandbox.Config{Name: name, BinDir: cfg.BinDir}
	switch peer {
	case PeerNetcubeNative:
		c.Routing = "native"
	case PeerNetcubeVXLAN:
		c.Routing = "vxlan"
	case PeerNetcubeKernel:
		c.Routing = "kernel"
	case PeerFlannel:
		c.PodNetwork, c.FlannelDir, c.APIServer = sandbox.PodNetworkFlannel, cfg.FlannelDir, true
	}
	_ = sandbox.Down(name, io.Discard)
	var log strings.Builder
	sb, err := sandbox.Up(c, &log)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, log.String())
	}
	return sb, nil
}

// preparePeer starts the servers (ncperf and iperf3 on CPU 1) in the
// target pods and widens the client's ports, as connection-rate runs need.
func preparePeer(sb *sandbox.Sandbox, ncperf string) error {
	client := sb.Topology.Nodes[0].Pods[0]
	if out, err := exec.Command("ip", "netns", "exec", client.Netns, "sysctl", "-q", "-w",
		"net.ipv4.tcp_tw_reuse=1", "net.ipv4.ip_local_port_range=1024 65000").CombinedOutput(); err != nil {
		return fmt.Errorf("client sysctls: %v: %s", err, out)
	}
	for _, p := range []sandbox.Pod{sb.Topology.Nodes[0].Pods[1], sb.Topology.Nodes[1].Pods[0]} {
		for _, cmd := range []*exec.Cmd{
			exec.Command("taskset", "-c", "1", ncperf, "serve", strconv.Itoa(podnetRRPort)),
			exec.Command("iperf3", "-s", "-p", strconv.Itoa(podnetIperfPort), "-A", "1"),
		} {
			if err := sb.Start(p.Name, cmd); err != nil {
				return err
			}
			go func() { _ = cmd.Wait() }() // sandbox down kills them
		}
	}
	return waitNcperf(sb, client.Name, ncperf, []sandbox.Pod{sb.Topology.Nodes[0].Pods[1], sb.Topology.Nodes[1].Pods[0]})
}

func waitNcperf(sb *sandbox.Sandbox, from, ncperf string, to []sandbox.Pod) error {
	for _, p := range to {
		for _, a := range []netip.Addr{p.IP4, p.IP6} {
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err := ncperfRun(sb, from, ncperf, "rr", a, 100*time.Millisecond)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s does not reach %s (%s): %w", from, p.Name, a, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return nil
}

func measurePodnet(sb *sandbox.Sandbox, client string, addr netip.Addr, ncperf string, d time.Duration, p *PodnetPoint) error {
	busy0 := cpuBusySeconds()
	g1, err := bulk(sb, client, addr.String(), podnetIperfPort, 1, "", d)
	if err != nil {
		return err
	}
	busy := cpuBusySeconds() - busy0
	g4, err := bulk(sb, client, addr.String(), podnetIperfPort, 4, "", d)
	if err != nil {
		return err
	}
	rr, err := ncperfRun(sb, client, ncperf, "rr", addr, d)
	if err != nil {
		return err
	}
	crr, err := ncperfRun(sb, client, ncperf, "crr", addr, d)
	if err != nil {
		return err
	}
	p.Bulk1, p.Bulk4 = append(p.Bulk1, g1), append(p.Bulk4, g4)
	cpg := 0.0
	if g1 > 0 {
		cpg = busy / (g1 * d.Seconds())
	}
	p.CPUPerG = append(p.CPUPerG, cpg)
	p.RR, p.CRR = append(p.RR, rr), append(p.CRR, crr)
	return nil
}

// ncperfRun runs the generator in a pod, on CPU 1 with its server.
func ncperfRun(sb *sandbox.Sandbox, pod, ncperf, mode string, addr netip.Addr, d time.Duration) (native.Result, error) {
	var r native.Result
	out, err := runIn(sb, pod, exec.Command("taskset", "-c", "1", ncperf, mode, addr.String(), strconv.Itoa(podnetRRPort),
		strconv.FormatFloat(d.Seconds(), 'f', 3, 64)))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("ncperf output %q: %w", out, err)
	}
	if r.Ops == 0 || r.Errors > 0 {
		return r, fmt.Errorf("ncperf %s to %s: %d operations, %d errors", mode, addr, r.Ops, r.Errors)
	}
	return r, nil
}

// barePair is the reference every pod network is measured against: a
// bare veth pair between two namespaces (no routing, no program), the
// generator's server on one end, measured in every run beside the peers
// (its own rate moves with the machine's day as theirs do).
type barePair struct {
	client, server string // namespaces
	ncperf         string
	srv            *exec.Cmd
}

// Its addresses.
var bareAddrs = map[string]string{"IPv4": "192.0.2.2", "IPv6": "2001:db8::2"}

// newBarePair makes the pair and starts the server; close removes both.
func newBarePair(ncperf string) (_ *barePair, err error) {
	p := &barePair{client: fmt.Sprintf("ncbare%d-a", os.Getpid()), server: fmt.Sprintf("ncbare%d-b", os.Getpid()), ncperf: ncperf}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	a, b := p.client, p.server
	for _, args := range [][]string{
		{"netns", "add", a}, {"netns", "add", b},
		{"-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b},
		{"-n", a, "addr", "add", "192.0.2.1/24", "dev", "eth0"}, {"-n", b, "addr", "add", bareAddrs["IPv4"] + "/24", "dev", "eth0"},
		{"-n", a, "addr", "add", "2001:db8::1/64", "dev", "eth0", "nodad"}, {"-n", b, "addr", "add", bareAddrs["IPv6"] + "/64", "dev", "eth0", "nodad"},
		{"-n", a, "link", "set", "eth0", "up"}, {"-n", b, "link", "set", "eth0", "up"},
		{"-n", a, "link", "set", "lo", "up"}, {"-n", b, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("bare veth pair: ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", a, "sysctl", "-q", "-w", "net.ipv4.tcp_tw_reuse=1",
		"net.ipv4.ip_local_port_range=1024 65000").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bare veth pair sysctls: %v: %s", err, out)
	}
	p.srv = exec.Command("ip", "netns", "exec", b, "taskset", "-c", "1", ncperf, "serve", strconv.Itoa(podnetRRPort))
	if err := p.srv.Start(); err != nil {
		return nil, err
	}
	for _, fam := range []string{"IPv4", "IPv6"} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := p.run("rr", fam, 50*time.Millisecond)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("bare veth pair: the server does not answer on %s: %w", bareAddrs[fam], err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return p, nil
}

func (p *barePair) run(mode, fam string, d time.Duration) (native.Result, error) {
	var r native.Result
	out, err := exec.Command("ip", "netns", "exec", p.client, "taskset", "-c", "1", p.ncperf, mode, bareAddrs[fam],
		strconv.Itoa(podnetRRPort), strconv.FormatFloat(d.Seconds(), 'f', 3, 64)).Output()
	if err != nil {
		return r, fmt.Errorf("ncperf %s on the bare pair: %w", mode, err)
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("ncperf output %q: %w", out, err)
	}
	if r.Ops == 0 || r.Errors > 0 {
		return r, fmt.Errorf("ncperf %s on the bare pair (%s): %d operations, %d errors", mode, fam, r.Ops, r.Errors)
	}
	return r, nil
}

// measure adds one run of request/response and new connections in fam.
func (p *barePair) measure(fam string, d time.Duration, pt *PodnetPoint) error {
	rr, err := p.run("rr", fam, d)
	if err != nil {
		return err
	}
	crr, err := p.run("crr", fam, d)
	if err != nil {
		return err
	}
	pt.RR, pt.CRR = append(pt.RR, rr), append(pt.CRR, crr)
	return nil
}

func (p *barePair) close() {
	if p.srv != nil && p.srv.Process != nil {
		_ = p.srv.Process.Kill()
		_ = p.srv.Wait()
	}
	_ = exec.Command("ip", "netns", "del", p.client).Run()
	_ = exec.Command("ip", "netns", "del", p.server).Run()
}

// cpuBusySeconds is the machine's busy CPU time so far, every CPU summed
// (/proc/stat, less idle and iowait).
func cpuBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += n
	}
	return busy / 100 // USER_HZ
}

func kernelRelease() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

// FlannelDir builds (or finds cached) flanneld and the bridge and
// host-local plugins and returns their directory. NETCUBE_FLANNEL_DIR
// overrides it.
func FlannelDir() (string, error) {
	return kubeenv.CachedBuild("NETCUBE_FLANNEL_DIR", "build-flannel.sh")
}
