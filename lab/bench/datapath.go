package bench

import (
	"encoding/json"
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

	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
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
	benchVIP4 = "10.96.0.100"
	benchVIP6 = "fd00:10:96::100"
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

	client := sb.Topology.ClientPod()
	server := sb.Topology.Nodes[0].Pods[1] // same node: the comparison isolates the Service datapath
	if err := sb.Topology.WriteManifest("bench.yaml", benchManifest(server)); err != nil {
		return nil, err
	}
	if err := sb.Topology.AddPodAddress(client.Name, directSrc4, directSrc6); err != nil {
		return nil, err
	}
	// Client on CPU 0, server on CPU 1 for bulk; both on CPU 1 for
	// request/response (unpinned, cross-CPU wake-ups dominate latency).
	servers := []*exec.Cmd{
		pinned(1, filepath.Join(cfg.BinDir, sandbox.LabBinary), "pod", "serve", "--sequential", "--name", "bench", "--port", strconv.Itoa(rrPort)),
		exec.Command("iperf3", "-s", "-p", strconv.Itoa(iperfPort), "-A", "1"),
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
				rrPort      int
				src         netip.Addr
				into        *[]Measurement
			}{
				{"pod->pod", fam.podIP, rrPort, fam.directSrc, &r.Direct},
				{"pod->Service", fam.vip, 80, netip.Addr{}, &r.Service},
			} {
				fmt.Fprintf(cfg.Log, "  socket-LB %-5v %s run %d/%d %-12s ", socketLB, fam.name, run, cfg.Runs, target.label)
				m, err := measure(sb, client.Name, cfg, target.host, target.rrPort, target.src)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(cfg.Log, "%.2f Gbit/s, rr %.0f/s p50 %.1fµs p99 %.1fµs, %.0f conn/s\n",
					m.TCPGbps, m.RRPerSec, m.RRP50, m.RRP99, m.CRRPerS)
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
	}
	epPorts := []sandbox.PortSpec{
		{Name: "rr", Port: rrPort, Protocol: "TCP"},
		{Name: "iperf", Port: iperfPort, Protocol: "TCP"},
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

func measure(sb *sandbox.Sandbox, pod string, cfg DatapathConfig, host string, port int, src netip.Addr) (Measurement, error) {
	var m Measurement
	load := []string{"pod", "load", "--duration", cfg.Duration.String()}
	srcArg := ""
	if src.IsValid() {
		load = append(load, "--source", src.String())
		srcArg = src.String()
	}
	var err error
	if m.TCPGbps, err = bulk(sb, pod, host, iperfPort, 1, srcArg, cfg.Duration); err != nil {
		return m, err
	}

	addr := net.JoinHostPort(host, strconv.Itoa(port))
	for _, persistent := range []bool{true, false} {
		args := append(append([]string(nil), load...), "--persistent="+strconv.FormatBool(persistent), addr)
		out, err := runIn(sb, pod, pinned(1, filepath.Join(cfg.BinDir, sandbox.LabBinary), args...))
		if err != nil {
			return m, err
		}
		var s traffic.Summary
		if err := json.Unmarshal(out, &s); err != nil {
			return m, fmt.Errorf("load output %q: %w", out, err)
		}
		if s.Errors > 0 {
			fmt.Fprintf(cfg.Log, "[%d errors to %s: %s] ", s.Errors, addr, s.FirstErr)
		}
		m.Errors += s.Errors
		if persistent {
			m.RRPerSec, m.RRP50, m.RRP99 = s.PerSec, s.P50, s.P99
		} else {
			m.CRRPerS = s.PerSec
		}
	}
	return m, nil
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
