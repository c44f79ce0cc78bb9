package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/netcube/netcube/lab/bench/native"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// ObservabilityConfig configures `netcube-lab bench observability`: what
// the datapath's events cost the traffic.
type ObservabilityConfig struct {
	Duration time.Duration // per measurement
	Runs     int
	BinDir   string
	Hubble   string // the hubble CLI
	OutDir   string // observability.{json,md} and plots; "": none
	Log      io.Writer
	// Set when the measurement starts.
	MeasuredAt time.Time
	Commit     string
}

// ObservabilityMode is one way the events are configured.
type ObservabilityMode struct {
	Name string `json:"name"`
	// Flags are monitor_config's: what the datapath reports.
	Flags datapath.MonFlags `json:"flags"`
	// Client: a `hubble observe -f` follows the events meanwhile.
	Client bool          `json:"hubble_client"`
	Runs   []Measurement `json:"runs"`
	// CPU is what the node's agent and the hubble client used during
	// each run, in CPU seconds per second of the run.
	CPU []RunCPU `json:"cpu"`
	// Delivered counts what the client received during the runs.
	Delivered uint64 `json:"flows_delivered,omitempty"`
}

// RunCPU is the CPU one run cost the agent and the hubble client (CPU
// seconds per second of wall time: 1 is one CPU's whole time).
type RunCPU struct {
	Agent  float64 `json:"agent"`
	Client float64 `json:"hubble_client,omitempty"`
}

// Delivery is how many events per second the agent delivers to one
// client, with every event on (trace), at one rate of new connections,
// and what was lost on the way.
type Delivery struct {
	Rate          float64 `json:"target_conn_per_sec"` // 0: as fast as the load goes
	Seconds       float64 `json:"seconds"`
	ConnPerSec    float64 `json:"conn_per_sec"`
	Written       uint64  `json:"events_written"`          // to the ring buffer
	LostDatapath  uint64  `json:"events_lost_ring_buffer"` // ring buffer full
	Delivered     uint64  `json:"flows_delivered"`         // to the client
	LostToClient  uint64  `json:"flows_lost_to_client"`    // LostEvents the client was told of
	DeliveredRate float64 `json:"flows_per_sec"`
}

// The modes, as the report names them.
const (
	modeOff     = "off (no events, no per-cube counts)"
	modeDefault = "default (drops, policy verdicts, per-cube counts)"
	modeClient  = "default + hubble observe -f"
)

// ObservabilityResult is the benchmark's outcome.
type ObservabilityResult struct {
	Modes    []ObservabilityMode `json:"modes"`
	Delivery []Delivery          `json:"delivery"`
}

// Observability measures pod→Service traffic (socket-LB, the backend on the
// client's node, selected by a NetworkPolicy that allows the client, so
// that each new connection is a policy verdict) with observability off
// (no events, no per-cube counts), with the default (drops, policy
// verdicts, per-cube counts), and with the default and a hubble client
// following them; the modes alternate, Runs times. Then, with
// every event on, how many the agent delivers to one client per second.
func Observability(cfg *ObservabilityConfig) (ObservabilityResult, error) {
	cfg.MeasuredAt, cfg.Commit = time.Now(), Commit()
	res := ObservabilityResult{Modes: []ObservabilityMode{
		{Name: modeOff, Flags: 0},
		{Name: modeDefault, Flags: monitor.DefaultFlags},
		{Name: modeClient, Flags: monitor.DefaultFlags, Client: true},
	}}
	const name = "benchobs"
	_ = sandbox.Down(name, io.Discard)
	sb, err := sandbox.Up(sandbox.Config{Name: name, SocketLB: true, BinDir: cfg.BinDir}, cfg.Log)
	if err != nil {
		return res, err
	}
	defer sandbox.Down(name, cfg.Log)
	node := sb.Topology.Nodes[0]
	client := sb.Topology.ClientPod()
	server := sb.Topology.Nodes[0].Pods[1]
	policy := fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bench, namespace: default}
spec:
  podSelector: {matchLabels: {pod: %s}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
`, server.Name)
	if err := sb.Topology.WriteManifest("bench.yaml", benchManifest(server)+"---\n"+policy); err != nil {
		return res, err
	}
	ncperf, done, err := native.BuildTemp()
	if err != nil {
		return res, err
	}
	defer done()
	servers := []*exec.Cmd{
		pinned(1, filepath.Join(cfg.BinDir, sandbox.LabBinary), "pod", "serve", "--sequential", "--name", "bench", "--port", fmt.Sprint(rrPort)),
		exec.Command("iperf3", "-s", "-p", fmt.Sprint(iperfPort), "-A", "1"),
		exec.Command("taskset", "-c", "1", ncperf, "serve", fmt.Sprint(ncperfPort)),
	}
	for _, s := range servers {
		if err := sb.Start(server.Name, s); err != nil {
			return res, err
		}
		defer func() { _ = s.Process.Kill(); _ = s.Wait() }()
	}
	vip := benchVIP4 + ":80"
	if err := waitReachable(sb, client.Name, cfg.BinDir, vip); err != nil {
		return res, err
	}
	maps, closeMaps, err := datapath.OpenPinnedForWriting(node.PinDir)
	if err != nil {
		return res, err
	}
	defer closeMaps()
	// The agent's setting is restored at the end (its flags at start).
	defer monitor.SetFlags(maps, monitor.DefaultFlags)
	dcfg := DatapathConfig{Duration: cfg.Duration, BinDir: cfg.BinDir, Log: cfg.Log}
	socket := sb.Topology.HubbleSocket(node)
	for run := 1; run <= cfg.Runs; run++ {
		for i := range res.Modes {
			m := &res.Modes[i]
			if err := monitor.SetFlags(maps, m.Flags); err != nil {
				return res, err
			}
			var c *hubbleClient
			if m.Client {
				if c, err = followHubble(cfg.Hubble, socket); err != nil {
					return res, err
				}
			}
			fmt.Fprintf(cfg.Log, "  run %d/%d %-34s ", run, cfg.Runs, m.Name)
			agent, _ := sb.Topology.AgentPID(node.Name)
			agent0, client0, start := cpuOf(agent), 0.0, time.Now()
			if c != nil {
				client0 = cpuOf(c.cmd.Process.Pid)
			}
			meas, err := measure(sb, client.Name, ncperf, dcfg, benchVIP4, 81, netip.Addr{})
			secs := time.Since(start).Seconds()
			usage := RunCPU{Agent: (cpuOf(agent) - agent0) / secs}
			if c != nil {
				usage.Client = (cpuOf(c.cmd.Process.Pid) - client0) / secs
				m.Delivered += c.stop()
			}
			m.CPU = append(m.CPU, usage)
			if err != nil {
				return res, err
			}
			fmt.Fprintf(cfg.Log, "%.2f Gbit/s, rr %.0f/s p99 %.1fµs, %.0f conn/s\n", meas.TCPGbps, meas.RRPerSec, meas.RRP99, meas.CRRPerS)
			m.Runs = append(m.Runs, meas)
		}
	}

	// Delivery: every event on, a client following, new connections at
	// rising rates, until events are lost (or the load's own limit).
	if err := monitor.SetFlags(maps, monitor.DefaultFlags|datapath.MonFlagTrace); err != nil {
		return res, err
	}
	for _, rate := range []float64{500, 1000, 2000, 4000, 8000, 0} {
		d, err := deliver(sb, cfg, maps, client.Name, socket, vip, rate)
		if err != nil {
			return res, err
		}
		res.Delivery = append(res.Delivery, d)
		if d.LostDatapath > 0 || d.LostToClient > 0 {
			break
		}
	}
	if cfg.OutDir != "" {
		if err := writeObservability(*cfg, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// deliver runs new connections at rate (0: back to back) for twice the
// measurement's duration with a hubble client following every event.
func deliver(sb *sandbox.Sandbox, cfg *ObservabilityConfig, maps *cube.Maps, client, socket, vip string, rate float64) (Delivery, error) {
	d := Delivery{Rate: rate}
	written0, lost0 := cube.PerCPUSum(maps.Map(monitor.MapStats), uint32(datapath.MonStatSent)), cube.PerCPUSum(maps.Map(monitor.MapStats), uint32(datapath.MonStatLost))
	c, err := followHubble(cfg.Hubble, socket)
	if err != nil {
		return d, err
	}
	start := time.Now()
	args := []string{"pod", "load", "--duration", (2 * cfg.Duration).String(), "--persistent=false"}
	if rate > 0 {
		args = append(args, "--rate", fmt.Sprint(rate))
	}
	out, err := runIn(sb, client, pinned(1, filepath.Join(cfg.BinDir, sandbox.LabBinary), append(args, vip)...))
	time.Sleep(time.Second) // the last events reach the client
	d.Delivered, d.LostToClient = c.stop(), c.lost.Load()
	d.Seconds = time.Since(start).Seconds()
	if err != nil {
		return d, err
	}
	var s traffic.Summary
	_ = json.Unmarshal(out, &s)
	d.ConnPerSec = s.PerSec
	d.Written, d.LostDatapath = cube.PerCPUSum(maps.Map(monitor.MapStats), uint32(datapath.MonStatSent))-written0, cube.PerCPUSum(maps.Map(monitor.MapStats), uint32(datapath.MonStatLost))-lost0
	d.DeliveredRate = float64(d.Delivered) / d.Seconds
	target := "as fast as it goes"
	if rate > 0 {
		target = fmt.Sprintf("%.0f/s", rate)
	}
	fmt.Fprintf(cfg.Log, "  delivery, new connections %s: %.0f conn/s, %d events written, %d lost in the ring buffer, %d flows delivered (%.0f/s), %d lost to the client\n",
		target, d.ConnPerSec, d.Written, d.LostDatapath, d.Delivered, d.DeliveredRate, d.LostToClient)
	return d, nil
}

// hubbleCPU is the CPU the hubble client runs on (followHubble).
const hubbleCPU = 0

// hubbleClient is a `hubble observe -f -o json` counting what it gets.
type hubbleClient struct {
	cmd   *exec.Cmd
	flows atomic.Uint64
	lost  atomic.Uint64
	done  chan struct{}
}

// followHubble starts the client, and reads what it prints, on CPU 0,
// away from the benchmark's client and server (CPU 1): an operator's
// terminal, or Hubble Relay, is
// not the workload's core, and on a 2-CPU machine an unpinned client
// takes its CPU from the measured traffic (+14.3% on new connections/s
// at 5ec9299, where the agent's own share was a third of the client's).
func followHubble(hubble, socket string) (*hubbleClient, error) {
	c := &hubbleClient{cmd: exec.Command("taskset", "-c", fmt.Sprint(hubbleCPU), hubble, "observe", "--server", "unix://"+socket, "-f", "-o", "json"),
		done: make(chan struct{})}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("hubble observe: %w", err)
	}
	go func() {
		defer close(c.done)
		// The reader is on the client's CPU too: reading every flow it
		// prints is the benchmark's work, not the traffic's.
		runtime.LockOSThread()
		var cpu unix.CPUSet
		cpu.Set(hubbleCPU)
		_ = unix.SchedSetaffinity(0, &cpu)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if bytes.Contains(line, []byte("lost_events")) || bytes.Contains(line, []byte("lostEvents")) {
				var r observerpb.GetFlowsResponse
				if (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(line, &r) == nil {
					c.lost.Add(r.GetLostEvents().GetNumEventsLost())
				}
				continue
			}
			c.flows.Add(1)
		}
	}()
	time.Sleep(300 * time.Millisecond) // connected and following
	return c, nil
}

// stop ends the client and returns the flows it received.
func (c *hubbleClient) stop() uint64 {
	stopProcess(c.cmd.Process, c.done, os.Interrupt, 5*time.Second)
	_ = c.cmd.Wait()
	return c.flows.Load()
}

// ObservabilityMarkdown renders the report: medians per mode, and each
// mode's cost relative to off (positive is worse).
func ObservabilityMarkdown(cfg ObservabilityConfig, r ObservabilityResult) string {
	var b strings.Builder
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	b.WriteString("# netcube: what observability costs the traffic\n\n")
	fmt.Fprintf(&b, "Measured %s, netcube %s, on %s (kernel %s, %d CPUs); %d runs of %s per figure, medians; ",
		cfg.MeasuredAt.UTC().Format("2006-01-02 15:04 UTC"), commitName(cfg.Commit), unix.ByteSliceToString(uts.Nodename[:]),
		unix.ByteSliceToString(uts.Release[:]), runtime.NumCPU(), cfg.Runs, cfg.Duration)
	b.WriteString("the three modes alternate back to back. pod→Service (socket-LB), the backend on the client's node and ")
	b.WriteString("selected by a NetworkPolicy allowing the client, so every new connection is a policy verdict (an event in the default mode). ")
	b.WriteString("Modes switch by writing the pinned monitor_config; the hubble client is cilium's CLI (`hubble observe -f -o json`) on the agent's socket, ")
	fmt.Fprintf(&b, "pinned to CPU %d, away from the benchmark's client and server (CPU 1), as an operator's terminal or Hubble Relay is not the workload's core; the agent is not pinned. ", hubbleCPU)
	b.WriteString("Cost = how much worse than off (targets: default ≤ 1%, with a client ≤ 3%).\n\n")
	b.WriteString("| metric |")
	for _, m := range r.Modes {
		fmt.Fprintf(&b, " %s median [min–max] |", m.Name)
	}
	for _, m := range r.Modes[1:] {
		fmt.Fprintf(&b, " cost: %s |", m.Name)
	}
	b.WriteString("\n|---|")
	for range len(r.Modes)*2 - 1 {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, mt := range metrics {
		if mt.get == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s |", mt.name)
		for _, m := range r.Modes {
			fmt.Fprintf(&b, " %s |", spread(m.Runs, mt))
		}
		off := median(r.Modes[0].Runs, mt.get)
		for _, m := range r.Modes[1:] {
			v := median(m.Runs, mt.get)
			cost := 0.0
			if off != 0 {
				if mt.higherBetter {
					cost = (off - v) / off * 100
				} else {
					cost = (v - off) / off * 100
				}
			}
			fmt.Fprintf(&b, " %+.1f%% |", cost)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| failed requests (sum of runs) |")
	for _, m := range r.Modes {
		fmt.Fprintf(&b, " %d |", errorsOf(m.Runs))
	}
	b.WriteString(" | |\n")
	for _, m := range r.Modes {
		if m.Client {
			fmt.Fprintf(&b, "\nThe client received %d flows over the %d runs of its mode.\n", m.Delivered, len(m.Runs))
		}
	}
	b.WriteString("\nCPU during the runs (CPU seconds per second, median [min–max]; 1 is one of the machine's CPUs):\n\n")
	b.WriteString("| mode | the node's agent | the hubble client |\n|---|---:|---:|\n")
	for _, m := range r.Modes {
		agent := func(c RunCPU) float64 { return c.Agent }
		client := "–"
		if m.Client {
			client = cpuSpread(m.CPU, func(c RunCPU) float64 { return c.Client })
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", m.Name, cpuSpread(m.CPU, agent), client)
	}
	b.WriteString("\n## Events delivered to one client\n\nEvery event on (drops, policy verdicts, and trace: each new connection's socket-LB translation and how its first packet was routed), a `hubble observe -f -o json` following, ")
	b.WriteString("new connections at rising rates (each step twice the measurement's duration) until events are lost. ")
	b.WriteString("Delivered/s counts the flows the client printed over the step, the second it is given to drain included.\n\n")
	b.WriteString("| target conn/s | conn/s | events written | lost in the ring buffer | flows delivered | delivered/s | lost on the way to the client |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	best := 0.0
	for _, d := range r.Delivery {
		target := "back to back"
		if d.Rate > 0 {
			target = fmt.Sprintf("%.0f", d.Rate)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %d | %d | %d | %.0f | %d |\n", target, d.ConnPerSec, d.Written, d.LostDatapath, d.Delivered, d.DeliveredRate, d.LostToClient)
		if d.LostDatapath == 0 && d.LostToClient == 0 {
			best = max(best, float64(d.Written)/d.Seconds)
		}
	}
	fmt.Fprintf(&b, "\nHighest rate with nothing lost: %.0f events/s written and delivered.", best)
	fmt.Fprintf(&b, "\n\nReproduce: `make bench-observability` (`bin/netcube-lab bench observability --duration %s --runs %d`).\n", cfg.Duration, cfg.Runs)
	return b.String()
}

func writeObservability(cfg ObservabilityConfig, r ObservabilityResult) error {
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return err
	}
	j, _ := json.MarshalIndent(map[string]any{
		"commit": cfg.Commit, "measured_at": cfg.MeasuredAt.UTC(), "duration_s": cfg.Duration.Seconds(), "runs": cfg.Runs, "result": r,
	}, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.OutDir, "observability.json"), j, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.OutDir, "observability.md"), []byte(ObservabilityMarkdown(cfg, r)), 0o644); err != nil {
		return err
	}
	runs := make([]int, cfg.Runs)
	for i := range runs {
		runs[i] = i + 1
	}
	for _, p := range []struct {
		file string
		m    metric
	}{{"observability-conn.svg", metrics[4]}, {"observability-rr-p99.svg", metrics[3]}, {"observability-tput.svg", metrics[0]}} {
		var ss []series
		for _, m := range r.Modes {
			ys := make([]float64, cfg.Runs)
			for i := range ys {
				ys[i] = math.NaN()
				if i < len(m.Runs) {
					ys[i] = p.m.get(m.Runs[i])
				}
			}
			ss = append(ss, series{name: m.Name, ys: ys})
		}
		svg := svgPlot(p.m.name+", each run (the modes alternate within a run)", "run", runs, ss)
		if err := os.WriteFile(filepath.Join(cfg.OutDir, p.file), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cpuOf is a process's CPU seconds so far (procUsage).
func cpuOf(pid int) float64 {
	cpu, _ := procUsage(pid)
	return cpu
}

// cpuSpread is the median [min–max] of one CPU figure of the runs.
func cpuSpread(runs []RunCPU, get func(RunCPU) float64) string {
	if len(runs) == 0 {
		return "–"
	}
	vs := make([]float64, len(runs))
	for i, r := range runs {
		vs[i] = get(r)
	}
	sort.Float64s(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return fmt.Sprintf("%.3f [%.3f–%.3f]", med, vs[0], vs[len(vs)-1])
}
