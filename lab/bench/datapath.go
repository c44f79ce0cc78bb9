package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/lab/bench/native"
	"github.com/netcube/netcube/lab/sandbox"
)

// DatapathConfig configures `netcube-lab bench datapath`.
type DatapathConfig struct {
	Duration time.Duration // per measurement
	Runs     int           // repetitions; medians are reported
	BinDir   string
	OutDir   string // where datapath.{json,md} go; "" = don't write
	Log      io.Writer
	// MeasuredAt and Commit are set when the measurement starts.
	MeasuredAt time.Time
	Commit     string
}

// Ports of the benchmark's own servers in the backend pod.
const (
	rrPort    = 9090
	iperfPort = 5201
	// ncperfPort is ncperf's, behind the Service's port 81.
	ncperfPort = 7000
	benchVIP4  = "10.96.0.100"
	benchVIP6  = "fd00:10:96::100"
)

// The client's second address, used for pod->pod runs only.
var (
	directSrc4 = netip.MustParseAddr("10.244.1.211")
	directSrc6 = netip.MustParseAddr("fd00:10:244:1::211")
)

// Measurement is one figure set for one target.
type Measurement struct {
	TCPGbps  float64 `json:"tcp_gbps"`
	RRPerSec float64 `json:"rr_per_sec"`
	RRP50    float64 `json:"rr_p50_us"`
	RRP99    float64 `json:"rr_p99_us"`
	CRRPerS  float64 `json:"conn_per_sec"`
	Errors   int     `json:"errors"`
	// BPFRunsPerRR and BPFNsPerRR: netcube's programs' runs and time per
	// request/response (bpf_stats, every node's programs), in a run of
	// their own.
	BPFRunsPerRR float64 `json:"bpf_runs_per_rr"`
	BPFNsPerRR   float64 `json:"bpf_ns_per_rr"`
}

// Result is the outcome of one mode (socket-LB on or off) and family.
type Result struct {
	SocketLB bool          `json:"socket_lb"`
	Family   string        `json:"family"`
	Direct   []Measurement `json:"pod_to_pod"`
	Service  []Measurement `json:"pod_to_service"`
}

// Datapath runs the benchmark: for socket-LB on and off, pod->pod and
// pod->ClusterIP to a backend on the same node, alternating, Runs times.
func Datapath(cfg *DatapathConfig) ([]Result, error) {
	cfg.MeasuredAt, cfg.Commit = time.Now(), Commit()
	var results []Result
	for _, socketLB := range []bool{true, false} {
		rs, err := datapathMode(*cfg, socketLB)
		if err != nil {
			return nil, err
		}
		results = append(results, rs...)
	}
	if cfg.OutDir != "" {
		if err := writeReport(*cfg, results); err != nil {
			return nil, err
		}
	}
	return results, nil
}

func datapathMode(cfg DatapathConfig, socketLB bool) ([]Result, error) {
	const name = "bench"
	_ = sandbox.Down(name, io.Discard)
	sb, err := sandbox.Up(sandbox.Config{Name: name, SocketLB: socketLB, BinDir: cfg.BinDir}, cfg.Log)
	if err != nil {
		return nil, err
	}
	defer sandbox.Down(name, cfg.Log)
	ncperf, done, err := native.BuildTemp()
	if err != nil {
		return nil, err
	}
	defer done()

	client := sb.Topology.ClientPod()
	server := sb.Topology.Nodes[0].Pods[1] // same node: the comparison isolates the Service datapath
	if err := sb.Topology.WriteManifest("bench.yaml", benchManifest(server)); err != nil {
		return nil, err
	}
	if err := sb.Topology.AddPodAddress(client.Name, directSrc4, directSrc6); err != nil {
		return nil, err
	}
	// New connections come and go fast: ports reused past TIME_WAIT.
	if out, err := exec.Command("ip", "netns", "exec", client.Netns, "sysctl", "-q", "-w",
		"net.ipv4.tcp_tw_reuse=1", "net.ipv4.ip_local_port_range=1024 65000").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s sysctls: %v: %s", client.Name, err, out)
	}
	// Client on CPU 0, server on CPU 1 for bulk; both on CPU 1 for
	// request/response (unpinned, cross-CPU wake-ups dominate latency).
	servers := []*exec.Cmd{
		pinned(1, filepath.Join(cfg.BinDir, sandbox.LabBinary), "pod", "serve", "--sequential", "--name", "bench", "--port", strconv.Itoa(rrPort)),
		exec.Command("iperf3", "-s", "-p", strconv.Itoa(iperfPort), "-A", "1"),
		exec.Command("taskset", "-c", "1", ncperf, "serve", strconv.Itoa(ncperfPort)),
	}
	for _, s := range servers {
		if err := sb.Start(server.Name, s); err != nil {
			return nil, err
		}
		defer func() { _ = s.Process.Kill(); _ = s.Wait() }()
	}

	var results []Result
	for _, fam := range []struct {
		name, podIP, vip string
		directSrc        netip.Addr
	}{
		{"IPv4", server.IP4.String(), benchVIP4, directSrc4},
		{"IPv6", server.IP6.String(), benchVIP6, directSrc6},
	} {
		if err := waitReachable(sb, client.Name, cfg.BinDir, net.JoinHostPort(fam.vip, "80")); err != nil {
			return nil, err
		}
		r := Result{SocketLB: socketLB, Family: fam.name}
		for run := 1; run <= cfg.Runs; run++ {
			for _, target := range []struct {
				label, host string
				ncperfPort  int
				src         netip.Addr
				into        *[]Measurement
			}{
				{"pod->pod", fam.podIP, ncperfPort, fam.directSrc, &r.Direct},
				{"pod->Service", fam.vip, 81, netip.Addr{}, &r.Service},
			} {
				fmt.Fprintf(cfg.Log, "  socket-LB %-5v %s run %d/%d %-12s ", socketLB, fam.name, run, cfg.Runs, target.label)
				m, err := measure(sb, client.Name, ncperf, cfg, target.host, target.ncperfPort, target.src)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(cfg.Log, "%.2f Gbit/s, rr %.0f/s p50 %.1fµs p99 %.1fµs, %.0f conn/s; BPF per request: %.2f runs, %.0f ns\n",
					m.TCPGbps, m.RRPerSec, m.RRP50, m.RRP99, m.CRRPerS, m.BPFRunsPerRR, m.BPFNsPerRR)
				*target.into = append(*target.into, m)
			}
		}
		results = append(results, r)
	}
	return results, nil
}

func benchManifest(server sandbox.Pod) string {
	ports := []sandbox.PortSpec{
		{Name: "rr", Port: 80, Protocol: "TCP", TargetPort: "rr"},
		{Name: "iperf", Port: iperfPort, Protocol: "TCP", TargetPort: "iperf"},
		{Name: "ncperf", Port: 81, Protocol: "TCP", TargetPort: "ncperf"},
	}
	epPorts := []sandbox.PortSpec{
		{Name: "rr", Port: rrPort, Protocol: "TCP"},
		{Name: "iperf", Port: iperfPort, Protocol: "TCP"},
		{Name: "ncperf", Port: ncperfPort, Protocol: "TCP"},
	}
	return sandbox.ServiceYAML("bench", []string{benchVIP4, benchVIP6}, ports) + "---\n" +
		sandbox.SliceYAML("bench", false, epPorts, []sandbox.Pod{server}) + "---\n" +
		sandbox.SliceYAML("bench", true, epPorts, []sandbox.Pod{server})
}

// pinned runs a Go tool on one CPU, with one P for Go code and without the
// runtime's preemption signals interrupting its blocking syscalls.
func pinned(cpu int, name string, args ...string) *exec.Cmd {
	cmd := exec.Command("taskset", append([]string{"-c", strconv.Itoa(cpu), name}, args...)...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	return cmd
}

func waitReachable(sb *sandbox.Sandbox, pod, bin, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := sb.Output(pod, filepath.Join(bin, sandbox.LabBinary), "pod", "request", "--timeout", "200ms", addr)
		if err == nil && strings.Contains(string(out), `"backend":"bench"`) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("benchmark Service %s not reachable: %s %v", addr, out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measure takes one figure set: bulk with iperf3; request/response and
// new connections with ncperf (C), client and server on CPU 1 (the Go
// generator's own scheduling and collection widened the tail it
// measured); then a second of request/response with the kernel's BPF
// statistics on, for the BPF programs' runs and time per request (kept
// out of the timed runs: the statistics cost two clock reads per run).
func measure(sb *sandbox.Sandbox, pod, ncperf string, cfg DatapathConfig, host string, port int, src netip.Addr) (Measurement, error) {
	var m Measurement
	srcArg := ""
	if src.IsValid() {
		srcArg = src.String()
	}
	var err error
	if m.TCPGbps, err = bulk(sb, pod, host, iperfPort, 1, srcArg, cfg.Duration); err != nil {
		return m, err
	}
	run := func(mode string, d time.Duration) (native.Result, error) {
		args := []string{"-c", "1", ncperf, mode, host, strconv.Itoa(port), strconv.FormatFloat(d.Seconds(), 'f', 3, 64)}
		if srcArg != "" {
			args = append(args, srcArg)
		}
		var r native.Result
		out, err := runIn(sb, pod, exec.Command("taskset", args...))
		if err != nil {
			return r, err
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return r, fmt.Errorf("ncperf output %q: %w", out, err)
		}
		if r.Ops == 0 {
			return r, fmt.Errorf("ncperf %s to %s: no operation", mode, host)
		}
		return r, nil
	}
	rr, err := run("rr", cfg.Duration)
	if err != nil {
		return m, err
	}
	crr, err := run("crr", cfg.Duration)
	if err != nil {
		return m, err
	}
	m.RRPerSec, m.RRP50, m.RRP99, m.CRRPerS = rr.PerSec, rr.P50, rr.P99, crr.PerSec
	m.Errors = int(rr.Errors + crr.Errors)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		return m, fmt.Errorf("BPF statistics: %w", err)
	}
	defer stats.Close()
	c0, err := netcubeBPFCost()
	if err != nil {
		return m, err
	}
	profiled, err := run("rr", time.Second)
	if err != nil {
		return m, err
	}
	c1, err := netcubeBPFCost()
	if err != nil {
		return m, err
	}
	m.BPFRunsPerRR = float64(c1.runs-c0.runs) / float64(profiled.Ops)
	m.BPFNsPerRR = float64(c1.ns-c0.ns) / float64(profiled.Ops)
	return m, nil
}

// bpfCost is what netcube's programs ran, every node's copy summed.
type bpfCost struct{ runs, ns uint64 }

// netcubeBPFCost reads the kernel's statistics of the programs loaded
// under netcube's entry names (the tc programs, the socket hooks).
func netcubeBPFCost() (bpfCost, error) {
	var c bpfCost
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return c, nil
		}
		if err != nil {
			return c, err
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		info, err := p.Info()
		if err != nil || !netcubeEntry(info.Name) {
			p.Close()
			continue
		}
		st, err := p.Stats()
		p.Close()
		if err != nil {
			return c, err
		}
		c.runs += st.RunCount
		c.ns += uint64(st.Runtime)
	}
}

func netcubeEntry(name string) bool {
	switch name {
	case "from_pod", "to_pod", "from_net", "to_net", "from_overlay", "to_overlay":
		return true
	}
	return strings.HasPrefix(name, "sock_")
}

func runIn(sb *sandbox.Sandbox, pod string, cmd *exec.Cmd) ([]byte, error) {
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := sb.Start(pod, cmd); err != nil {
		return nil, err
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s %s", strings.Join(cmd.Args, " "), err, stdout.String(), stderr.String())
	}
	return []byte(stdout.String()), nil
}

func median(ms []Measurement, f func(Measurement) float64) float64 {
	vs := make([]float64, len(ms))
	for i, m := range ms {
		vs[i] = f(m)
	}
	slices.Sort(vs)
	if len(vs) == 0 {
		return 0
	}
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}
