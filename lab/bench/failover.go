package bench

// Failover: an external client opens new connections to a LoadBalancer
// IP at a steady rate while the node serving part of them dies (its
// agent killed and its link gone), and while its agent only restarts.
// Routed (BGP): the Service's address is routed by ECMP over both nodes;
// the router (BIRD) drops the dead node's next hop when its session's
// hold time expires. Reported: the gap (first failed connection to the
// last), the connections failed, and the router's next hops over time.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
)

// FailoverConfig is one `netcube-lab bench failover`.
type FailoverConfig struct {
	BinDir   string
	OutDir   string // "": no report files
	Log      io.Writer
	Runs     int
	Hold     time.Duration // the BGP sessions' hold time
	Interval time.Duration // between the client's connections
	Timeout  time.Duration // a connection not answered within it failed
	Before   time.Duration // measured before the fault
	After    time.Duration // and after it
	Modes    []string      // FailoverBGP, FailoverL2
}

// Failover modes: how the address reaches the client.
const (
	// FailoverBGP: the routed sandbox; both nodes announce the address
	// to the router (ECMP), which drops a node when its session's hold
	// time expires.
	FailoverBGP = "bgp"
	// FailoverL2: the nodes' shared link; one node, elected, answers ARP
	// for the address, and the other takes it over (gratuitous ARP) when
	// its heartbeats stop.
	FailoverL2 = "l2"
)

// Failover faults.
const (
	FaultNodeDies      = "node dies"      // agent SIGKILLed and its uplink down
	FaultAgentRestarts = "agent restarts" // SIGTERM, then started again 2 s later
)

// FailoverRun is one fault.
type FailoverRun struct {
	Run   int    `json:"run"`
	Mode  string `json:"mode"` // bgp or l2
	Fault string `json:"fault"`
	// Connections opened, and failed (not answered within the timeout).
	Connections int `json:"connections"`
	Failed      int `json:"failed"`
	// GapS: from the start of the first failed connection to the end of
	// the last one, after the fault (0: none failed); FirstFailS: the
	// first failure's start after the fault.
	GapS       float64 `json:"gap_s"`
	FirstFailS float64 `json:"first_fail_after_fault_s"`
	// RouterDropS: when the router's FIB stopped routing the address to
	// the faulted node, or (l2) when the other node's datapath took the
	// address over (seconds after the fault; -1: it never did).
	RouterDropS float64 `json:"router_drop_s"`
	// Timeline: per 200 ms from the start, connections answered and
	// failed and the router's next hops for the address.
	Timeline []FailoverSlot `json:"timeline"`
	FaultAtS float64        `json:"fault_at_s"`
}

// FailoverSlot is 200 ms of a run.
type FailoverSlot struct {
	AtS      float64 `json:"at_s"`
	OK       int     `json:"ok"`
	Failed   int     `json:"failed"`
	NextHops int     `json:"next_hops"`
}

// FailoverReport is docs/benchmarks/failover.{json,md}.
type FailoverReport struct {
	RunHeader
	HoldS      float64       `json:"bgp_hold_s"`
	IntervalMs float64       `json:"interval_ms"`
	TimeoutMs  float64       `json:"timeout_ms"`
	Results    []FailoverRun `json:"results"`
}

const (
	foService = "failover"
	foLBIP    = "198.51.100.80" // routed: any address the router learns
	foL2IP    = "172.30.0.80"   // on the nodes' link
	foCluster = "10.96.0.80"
)

// Failover runs each fault cfg.Runs times, each in a sandbox of its own.
func Failover(cfg FailoverConfig) (*FailoverReport, error) {
	if cfg.Runs < 1 || cfg.Hold < 3*time.Second || cfg.Interval <= 0 || cfg.Timeout <= 0 || cfg.Before <= 0 || cfg.After <= cfg.Hold {
		return nil, errors.New("bench failover: --runs ≥ 1, --hold ≥ 3s, --interval > 0, --timeout > 0, --before > 0, --after > --hold")
	}
	rep := &FailoverReport{
		RunHeader: newRunHeader(cfg.Runs, cfg.Before+cfg.After, fmt.Sprintf("netcube-lab bench failover --runs %d --hold %s --interval %s --timeout %s --before %s --after %s",
			cfg.Runs, cfg.Hold, cfg.Interval, cfg.Timeout, cfg.Before, cfg.After)),
		HoldS: cfg.Hold.Seconds(), IntervalMs: float64(cfg.Interval) / 1e6, TimeoutMs: float64(cfg.Timeout) / 1e6,
	}
	if len(cfg.Modes) == 0 {
		cfg.Modes = []string{FailoverBGP, FailoverL2}
	}
	for run := 1; run <= cfg.Runs; run++ {
		for _, mode := range cfg.Modes {
			for _, fault := range []string{FaultNodeDies, FaultAgentRestarts} {
				fmt.Fprintf(cfg.Log, "== run %d/%d, %s, %s\n", run, cfg.Runs, mode, fault)
				var r FailoverRun
				var err error
				switch mode {
				case FailoverBGP:
					r, err = failoverOnce(cfg, fault)
				case FailoverL2:
					r, err = failoverL2Once(cfg, fault)
				default:
					return nil, fmt.Errorf("bench failover: mode %q: want bgp or l2", mode)
				}
				if err != nil {
					return nil, fmt.Errorf("run %d, %s, %s: %w", run, mode, fault, err)
				}
				r.Run = run
				fmt.Fprintf(cfg.Log, "   %d connections, %d failed, gap %.2f s, the address moved after %.2f s\n", r.Connections, r.Failed, r.GapS, r.RouterDropS)
				rep.Results = append(rep.Results, r)
			}
		}
	}
	if cfg.OutDir != "" {
		if err := rep.Write(cfg.OutDir); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// attempt is one connection: when it started and whether it was answered.
type attempt struct {
	at time.Duration
	ok bool
}

func failoverOnce(cfg FailoverConfig, fault string) (FailoverRun, error) {
	const name = "bench-fo"
	_ = sandbox.Down(name, io.Discard)
	sb, err := sandbox.Up(sandbox.Config{Name: name, Nodes: 2, PodsPerNode: 1, BinDir: cfg.BinDir, Routed: true, BGPHoldTime: cfg.Hold}, io.Discard)
	if err != nil {
		return FailoverRun{}, err
	}
	defer func() { _ = sandbox.Down(name, io.Discard) }()
	top := sb.Topology
	victim := top.Nodes[1]
	// The Service's pod is on node1: what fails over is the address
	// (node2 serves it by forwarding there), not a backend on the dead
	// node, which nothing here would mark not ready (no kubelet).
	if err := top.WriteManifest("failover.yaml", failoverServiceYAML(foLBIP, top.Nodes[0].Pods)); err != nil {
		return FailoverRun{}, err
	}
	if err := waitNextHops(sb, foLBIP+"/32", 2, 60*time.Second); err != nil {
		return FailoverRun{}, err
	}
	hops := func() int {
		routes, _ := sb.RouterRoutes(4)
		return len(routes[foLBIP+"/32"])
	}
	return measureFailover(cfg, sb, FailoverBGP, fault, victim, foLBIP, hops, func(n int) bool { return n < 2 })
}

// failoverL2Once: the address on the nodes' own link, answered by the
// elected node; that node is the one faulted.
func failoverL2Once(cfg FailoverConfig, fault string) (FailoverRun, error) {
	const name = "bench-fo2"
	_ = sandbox.Down(name, io.Discard)
	sb, err := sandbox.Up(sandbox.Config{Name: name, Nodes: 2, PodsPerNode: 1, BinDir: cfg.BinDir}, io.Discard)
	if err != nil {
		return FailoverRun{}, err
	}
	defer func() { _ = sandbox.Down(name, io.Discard) }()
	top := sb.Topology
	if err := top.WriteManifest("failover.yaml", failoverServiceYAML(foL2IP, top.Pods())); err != nil {
		return FailoverRun{}, err
	}
	var victim, survivor sandbox.Node
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := top.Announcing(netip.MustParseAddr(foL2IP))
		if len(a) == 1 {
			victim, _ = top.Node(a[0])
			for _, n := range top.Nodes {
				if n.Name != a[0] {
					survivor = n
				}
			}
			break
		}
		if time.Now().After(deadline) {
			return FailoverRun{}, fmt.Errorf("%s announced by %v, not by one node", foL2IP, a)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The pod the survivor has serves: the address is what moves.
	if err := top.WriteManifest("failover.yaml", failoverServiceYAML(foL2IP, survivor.Pods)); err != nil {
		return FailoverRun{}, err
	}
	time.Sleep(2 * time.Second) // the endpoint change programmed
	takenOver := func() int {
		if slices.Contains(top.Announcing(netip.MustParseAddr(foL2IP)), survivor.Name) {
			return 1
		}
		return 0
	}
	return measureFailover(cfg, sb, FailoverL2, fault, victim, foL2IP, takenOver, func(n int) bool { return n == 1 })
}

// measureFailover runs the client against ip:80 from outside, samples
// the address's state (state: the router's next hops, or whether the
// survivor answers) every 100 ms, faults the victim after cfg.Before,
// and summarizes; moved says when the state shows the address moved.
func measureFailover(cfg FailoverConfig, sb *sandbox.Sandbox, mode, fault string, victim sandbox.Node, ip string,
	state func() int, moved func(int) bool) (FailoverRun, error) {
	r := FailoverRun{Mode: mode, Fault: fault, RouterDropS: -1}
	top := sb.Topology
	lab := filepath.Join(cfg.BinDir, sandbox.LabBinary)
	addr := netip.AddrPortFrom(netip.MustParseAddr(ip), 80).String()
	if err := waitAnswers(sb, lab, addr, 30*time.Second); err != nil {
		return r, err
	}
	start := time.Now()
	var mu sync.Mutex
	var attempts []attempt
	var samples []FailoverSlot // every 100 ms
	prober := exec.Command(lab, "pod", "request", "--count", "0", "--interval", cfg.Interval.String(), "--timeout", cfg.Timeout.String(), addr)
	out, err := prober.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := sb.Start(top.External.Name, prober); err != nil {
		return r, err
	}
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var res traffic.Result
			if json.Unmarshal(sc.Bytes(), &res) != nil {
				continue
			}
			at := time.Since(start) - time.Duration(res.Micros*1e3)
			mu.Lock()
			attempts = append(attempts, attempt{at: at, ok: res.Err == ""})
			mu.Unlock()
		}
	}()
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				n := state()
				mu.Lock()
				samples = append(samples, FailoverSlot{AtS: time.Since(start).Seconds(), NextHops: n})
				mu.Unlock()
			}
		}
	}()

	time.Sleep(cfg.Before)
	faultAt := time.Since(start)
	switch fault {
	case FaultNodeDies:
		// The link first: a node that loses power sends nothing, while an
		// agent killed on a live node has its kernel close the session
		// (a FIN), which graceful restart rightly rides out.
		if err := exec.Command("ip", "-n", victim.Netns, "link", "set", "eth0", "down").Run(); err != nil {
			return r, fmt.Errorf("%s's uplink down: %w", victim.Name, err)
		}
		if err := sb.StopAgent(victim.Name, true); err != nil {
			return r, err
		}
	case FaultAgentRestarts:
		if err := sb.StopAgent(victim.Name, false); err != nil {
			return r, err
		}
		time.Sleep(2 * time.Second)
		if err := sb.StartAgent(victim.Name); err != nil {
			return r, err
		}
	}
	time.Sleep(cfg.After)
	_ = prober.Process.Kill()
	<-probed
	_ = prober.Wait()
	close(stopSampling)
	<-sampled

	r.FaultAtS = faultAt.Seconds()
	summarizeFailover(&r, attempts, samples, faultAt, cfg.Timeout, moved)
	return r, nil
}

// summarizeFailover fills r's counts, gap, router drop time and timeline.
func summarizeFailover(r *FailoverRun, attempts []attempt, hops []FailoverSlot, faultAt, timeout time.Duration, moved func(int) bool) {
	var first, last time.Duration = -1, -1
	for _, a := range attempts {
		r.Connections++
		if a.ok {
			continue
		}
		r.Failed++
		if a.at >= faultAt-timeout {
			if first < 0 {
				first = a.at
			}
			last = a.at + timeout
		}
	}
	if first >= 0 {
		r.GapS = (last - first).Seconds()
		r.FirstFailS = (first - faultAt).Seconds()
	}
	for _, h := range hops {
		if h.AtS >= faultAt.Seconds() && moved(h.NextHops) {
			r.RouterDropS = h.AtS - faultAt.Seconds()
			break
		}
	}
	const slot = 200 * time.Millisecond
	end := time.Duration(0)
	for _, a := range attempts {
		end = max(end, a.at)
	}
	r.Timeline = make([]FailoverSlot, int(end/slot)+1)
	for i := range r.Timeline {
		r.Timeline[i].AtS = (time.Duration(i) * slot).Seconds()
	}
	for _, a := range attempts {
		if a.at < 0 {
			continue
		}
		s := &r.Timeline[int(a.at/slot)]
		if a.ok {
			s.OK++
		} else {
			s.Failed++
		}
	}
	for _, h := range hops {
		if i := int(h.AtS / slot.Seconds()); i < len(r.Timeline) {
			r.Timeline[i].NextHops = h.NextHops
		}
	}
}

// waitNextHops waits until the router routes prefix over n next hops.
func waitNextHops(sb *sandbox.Sandbox, prefix string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		routes, err := sb.RouterRoutes(4)
		if err == nil && len(routes[prefix]) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the router routes %s over %v, not %d next hops, after %s", prefix, routes[prefix], n, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// failoverServiceYAML is the LoadBalancer Service measured:
// externalTrafficPolicy Cluster, so both nodes announce its address and
// serve it with pods.
func failoverServiceYAML(lbIP string, pods []sandbox.Pod) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: default
spec:
  type: LoadBalancer
  externalTrafficPolicy: Cluster
  ipFamilies: [IPv4]
  clusterIP: %s
  clusterIPs: [%s]
  ports:
  - {name: http, port: 80, protocol: TCP, targetPort: http, nodePort: 30280}
status:
  loadBalancer:
    ingress:
    - ip: %s
---
`, foService, foCluster, foCluster, lbIP) + sandbox.SliceYAML(foService, false, sandbox.EndpointPorts[:1], pods)
}
