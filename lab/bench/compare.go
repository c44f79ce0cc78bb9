package bench

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/netcube/netcube/lab/traffic"
)

// CompareConfig configures `netcube-lab bench compare`: netcube against the
// real kube-proxy, side by side, as the number of Services grows.
type CompareConfig struct {
	Sizes []int // other Services in the cluster, ascending
	// Peers to run ("netcube", "iptables-nft", "iptables-legacy",
	// "nftables"); empty: all.
	Peers []string
	// KubeProxyMax is the largest size kube-proxy runs at (0: all sizes).
	KubeProxyMax int
	// MinSyncZeroMax: up to this size, kube-proxy's endpoint changes are
	// also timed with its --*-min-sync-period at 0 (shipped: 1 s, which
	// dominates its reaction at small sizes); 0: never.
	MinSyncZeroMax int
	// KubeProxyChangesMax: the largest size at which kube-proxy's endpoint
	// changes and rolling update are timed (0: every size it runs at);
	// above it, its full sync and steady state only. At 30,000 Services
	// one change takes iptables-nft about a minute and nftables mode about
	// three, so its changes and rolling update were most of that size's
	// two hours; netcube's are timed at every size.
	KubeProxyChangesMax int
	Duration            time.Duration // of each throughput, latency and rate measurement
	Runs                int           // repetitions of those; medians are reported
	Reactions           int           // scale-up/down pairs timed per family
	ChurnFor            time.Duration // length of the rolling-update run
	ChurnEvery          time.Duration // one replica replaced this often
	SyncTimeout         time.Duration // for a peer's full sync (kube-proxy at 30,000 takes minutes)
	BinDir              string
	ToolsDir            string // kube-proxy, kube-apiserver, etcd
	OutDir              string // compare.{json,md} and plots/; "" = none
	Log                 io.Writer
	Command             string // how the report says to reproduce it
	Sandbox             string // name of the sandbox the benchmark builds (default "kpb")
	// AgentArgs are added to netcube's agent's flags (the report's command
	// line shows them).
	AgentArgs []string
	// Merge keeps OutDir's earlier points at the sizes not measured now, so
	// a large size can be added to a report without measuring it all again.
	Merge bool
}

// PeerPoint is everything measured for one data plane at one size.
type PeerPoint struct {
	Peer       string    `json:"peer"`
	Services   int       `json:"services"`
	MeasuredAt time.Time `json:"measured_at"`
	// Control plane: start -> every Service programmed (netcube: its agent
	// reports its initial sync applied, which it does after the last
	// Service's map writes; kube-proxy: the measured Services answer in
	// both families, each family's rules being restored at once; either way
	// checked by the count not growing a second later), rules or map
	// entries then, and the proxy's
	// CPU seconds (with its iptables/nft children) and peak RSS over the
	// whole point.
	FullSyncS float64 `json:"full_sync_s"`
	// SyncControlPlaneCPUS: the API server's and etcd's CPU seconds over
	// the full sync (each full sync starts once they are idle).
	SyncControlPlaneCPUS float64 `json:"sync_control_plane_cpu_s"`
	// SyncSplit is where netcube's full sync went (nil for kube-proxy).
	SyncSplit  *FullSyncSplit  `json:"full_sync_split,omitempty"`
	Entries    int             `json:"entries"`
	CPUSeconds float64         `json:"cpu_seconds"`
	PeakRSSMB  float64         `json:"peak_rss_mb"`
	Families   []FamilyFigures `json:"families"`
}

// FullSyncSplit is where netcube's full sync went, in seconds, from the
// agent's log (its clock and the benchmark's are the machine's). The five
// spans add up to the full sync.
type FullSyncSplit struct {
	// LoadS: start → the agent logs its datapath loaded (the previous
	// pins removed, the process started, the BPF programs loaded).
	LoadS float64 `json:"load_s"`
	// FirstObjectS: → the first Service or EndpointSlice arrives (the
	// lists sent, the API server's first page).
	FirstObjectS float64 `json:"first_object_s"`
	// ListsS: → the initial lists are complete (every page read, decoded
	// and converted; nothing is applied before).
	ListsS float64 `json:"lists_s"`
	// ApplyS: → every Service computed and written to the maps.
	ApplyS float64 `json:"apply_s"`
	// ServedS: → the benchmark sees the measured Services answer (the
	// agent's ready file, its pods attached, the probes).
	ServedS float64 `json:"served_s"`
	// Phases: the lists' time summed over the two resources listed at
	// once (waiting for the API server's pages, decoding, converting) and
	// the apply's (computing, map writes), in ms, as the agent logs them.
	Phases SyncSplit `json:"phases"`
}

// FamilyFigures are one address family's figures.
type FamilyFigures struct {
	Family string `json:"family"`
	Runs   []Run  `json:"runs"`
	// API write -> traffic reaches an added endpoint (this is also "one
	// endpoint change -> datapath programmed") / stops reaching a removed one.
	ReactionUpMs   []float64       `json:"reaction_up_ms"`
	ReactionDownMs []float64       `json:"reaction_down_ms"`
	Churn          traffic.Summary `json:"churn"`
	// The same, kube-proxy restarted with --iptables-min-sync-period (or
	// --nftables-min-sync-period) 0; netcube, which batches nothing, has
	// its own figures here again.
	MinSyncZeroUpMs   []float64 `json:"min_sync_zero_up_ms,omitempty"`
	MinSyncZeroDownMs []float64 `json:"min_sync_zero_down_ms,omitempty"`
}

// Run is one repetition of the steady-state measurements.
type Run struct {
	// Bulk TCP throughput, Gbit/s, keyed by path and streams ("pod->pod x1").
	Bulk map[string]float64 `json:"bulk_gbps"`
	// Request/response on one connection, and on a new connection each
	// (connection rate and time to first byte), keyed by path:
	// "pod->pod", "pod->ClusterIP" (measured Service last in rule order),
	// "pod->ClusterIP first".
	RR  map[string]traffic.Summary `json:"rr"`
	CRR map[string]traffic.Summary `json:"crr"`
}

// Path names.
const (
	pathDirect   = "pod->pod"
	pathService  = "pod->ClusterIP"
	pathFirst    = "pod->ClusterIP first"
	pathNodePort = "external->NodePort"
)

// Compare runs the benchmark; every point is written to OutDir as soon as
// it is measured, so a long run that fails keeps what it has.
func Compare(cfg CompareConfig) (*CompareReport, error) {
	rep := newCompareReport(cfg)
	if cfg.Merge {
		if err := rep.keepEarlier(cfg.OutDir); err != nil {
			return nil, err
		}
	}
	peers := cfg.Peers
	if len(peers) == 0 {
		peers = []string{"netcube"}
		for _, m := range KubeProxyModes {
			peers = append(peers, m.Name)
		}
	}
	if cfg.Sandbox == "" {
		cfg.Sandbox = "kpb"
	}
	c, err := newCluster(cfg.Sandbox, cfg.BinDir, cfg.AgentArgs, cfg.Log)
	if err != nil {
		return nil, err
	}
	defer c.close()
	current, stopWatching := c.onInterrupt()
	defer stopWatching()
	start := time.Now()
	for _, n := range cfg.Sizes {
		fmt.Fprintf(cfg.Log, "== %d Services (%s elapsed)\n", n, time.Since(start).Round(time.Second))
		if err := c.grow(n); err != nil {
			return rep, err
		}
		for _, name := range peers {
			p, err := c.peer(name, cfg)
			if err != nil {
				return rep, err
			}
			if p == nil || (name != "netcube" && cfg.KubeProxyMax > 0 && n > cfg.KubeProxyMax) {
				continue
			}
			fmt.Fprintf(cfg.Log, "  -- %s at %d Services (%s elapsed)\n", name, n, time.Since(start).Round(time.Second))
			current(p)
			pt, err := c.measurePeer(p, n, cfg)
			current(nil)
			if stopErr := p.stop(); err == nil {
				err = stopErr
			}
			if err != nil {
				return rep, fmt.Errorf("%s at %d Services: %w", name, n, err)
			}
			rep.Points = append(rep.Points, pt)
			if cfg.OutDir != "" {
				if err := rep.Write(cfg.OutDir); err != nil {
					return rep, err
				}
			}
		}
	}
	fmt.Fprintf(cfg.Log, "== done in %s\n", time.Since(start).Round(time.Second))
	return rep, nil
}

// onInterrupt makes an interrupted run (Ctrl-C, SIGTERM) stop the peer
// being measured (kube-proxy --cleanup) and take the sandbox down before it
// exits. The first returned func tells it which peer runs (nil: none); the
// second hands the signals back when the run is over.
func (c *cluster) onInterrupt() (func(peer), func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	var mu sync.Mutex
	var running peer
	done := make(chan struct{})
	go func() {
		var s os.Signal
		select {
		case s = <-sig:
		case <-done:
			return
		}
		mu.Lock() // held until exit: the run cannot start another peer
		fmt.Fprintf(c.log, "%s: cleaning up\n", s)
		if running != nil {
			_ = running.stop()
		}
		c.close()
		os.Exit(130)
	}()
	set := func(p peer) {
		mu.Lock()
		defer mu.Unlock()
		running = p
	}
	return set, func() { signal.Stop(sig); close(done) }
}

func (c *cluster) peer(name string, cfg CompareConfig) (peer, error) {
	if name == "netcube" {
		return &netcubePeer{sb: c.sb, node: c.node}, nil
	}
	for _, m := range KubeProxyModes {
		if m.Name == name {
			return &KubeProxy{Mode: m, Node: c.node, Tools: cfg.ToolsDir, Config: c.sb.Topology.Kubeconfig(),
				LogFile: filepath.Join(c.sb.Topology.LogDir(), "kube-proxy-"+name+".log")}, nil
		}
	}
	return nil, fmt.Errorf("unknown peer %q (netcube, iptables-nft, iptables-legacy, nftables)", name)
}

func (c *cluster) measurePeer(p peer, n int, cfg CompareConfig) (PeerPoint, error) {
	pt := PeerPoint{Peer: p.name(), Services: n, MeasuredAt: time.Now().UTC()}
	c.controlPlane.settle(cfg.Log)
	cpu0 := c.controlPlane.cpu()
	t0 := time.Now()
	if err := p.start(); err != nil {
		return pt, err
	}
	alive := func() bool { return p.pid() != 0 && processAlive(p.pid()) }
	if err := c.waitServing(cfg.SyncTimeout, alive); err != nil {
		return pt, fmt.Errorf("full sync: %w", err)
	}
	served := time.Now()
	pt.FullSyncS = served.Sub(t0).Seconds()
	pt.SyncControlPlaneCPUS = c.controlPlane.cpu() - cpu0
	var err error
	if nc, ok := p.(*netcubePeer); ok {
		if pt.SyncSplit, err = nc.syncSplit(t0, served); err != nil {
			return pt, fmt.Errorf("full sync split: %w", err)
		}
	}
	if pt.Entries, err = p.entries(); err != nil {
		return pt, err
	}
	// netcube's clock must stop at its last Service, not at the first ones
	// to answer: nothing may be written after it. (kube-proxy may rewrite
	// its rules on its own schedule; its restores are all-or-nothing.)
	if p.name() == "netcube" {
		time.Sleep(time.Second)
		later, err := p.entries()
		if err != nil {
			return pt, err
		}
		if later != pt.Entries {
			return pt, fmt.Errorf("full sync timed at %d map entries, %d a second later: the clock stopped before the last Service was programmed", pt.Entries, later)
		}
	}
	fmt.Fprintf(cfg.Log, "     full sync %.2f s, %d rules/entries\n", pt.FullSyncS, pt.Entries)

	fams := c.families()
	pt.Families = make([]FamilyFigures, len(fams))
	for i, f := range fams {
		pt.Families[i].Family = f.name
	}
	vips := append(append([]string(nil), benchIPs...), churnIPs...)
	for run := 1; run <= cfg.Runs; run++ {
		if err := p.place(vips, false); err != nil {
			return pt, err
		}
		for i, f := range fams {
			r, err := c.steady(f, cfg.Duration)
			if err != nil {
				return pt, err
			}
			fmt.Fprintf(cfg.Log, "     %s run %d/%d: %s\n", f.name, run, cfg.Runs, r)
			pt.Families[i].Runs = append(pt.Families[i].Runs, r)
		}
		if !p.ordered() {
			continue
		}
		// The same Services at the top of KUBE-SERVICES.
		if err := p.place(vips, true); err != nil {
			return pt, err
		}
		for i, f := range fams {
			r := &pt.Families[i].Runs[len(pt.Families[i].Runs)-1]
			for _, persistent := range []bool{true, false} {
				s, err := requests(c.sb, c.binDir, c.client.Name, hostPort(f.bench, 80), persistent, "", cfg.Duration)
				if err != nil {
					return pt, err
				}
				if persistent {
					r.RR[pathFirst] = s
				} else {
					r.CRR[pathFirst] = s
				}
			}
			fmt.Fprintf(cfg.Log, "     %s run %d/%d, Services first: rr p99 %.1fµs, %.0f conn/s\n", f.name, run, cfg.Runs, r.RR[pathFirst].P99, r.CRR[pathFirst].PerSec)
		}
	}
	// Changes: every one makes kube-proxy re-sync (and re-order) its rules.
	timeChanges := p.name() == "netcube" || cfg.KubeProxyChangesMax == 0 || n <= cfg.KubeProxyChangesMax
	for i, f := range fams {
		if !timeChanges {
			break
		}
		ff := &pt.Families[i]
		for k := 0; k < cfg.Reactions; k++ {
			up, down, err := c.reaction(f, cfg.SyncTimeout)
			if err != nil {
				return pt, err
			}
			ff.ReactionUpMs, ff.ReactionDownMs = append(ff.ReactionUpMs, ms(up)), append(ff.ReactionDownMs, ms(down))
		}
		fmt.Fprintf(cfg.Log, "     %s endpoint added -> reached %v ms, removed -> left %v ms\n", f.name, ff.ReactionUpMs, ff.ReactionDownMs)
		if ff.Churn, err = c.churn(f, cfg.ChurnFor, cfg.ChurnEvery); err != nil {
			return pt, err
		}
		fmt.Fprintf(cfg.Log, "     %s rolling update: %s\n", f.name, ff.Churn)
		// Let the last churn step be programmed before the next family.
		if !waitUntil(cfg.SyncTimeout, 50*time.Millisecond, func() bool { return c.answers(hostPort(f.churn, churnPort), c.r1.Name) && onlyR1(c, f) }) {
			return pt, fmt.Errorf("churn Service did not settle back on %s", c.r1.Name)
		}
	}
	pt.CPUSeconds, pt.PeakRSSMB = procUsage(p.pid())
	fmt.Fprintf(cfg.Log, "     CPU %.1f s, peak RSS %.0f MB\n", pt.CPUSeconds, pt.PeakRSSMB)
	if cfg.MinSyncZeroMax > 0 && n <= cfg.MinSyncZeroMax {
		if err := c.minSyncZero(p, &pt, cfg); err != nil {
			return pt, err
		}
	}
	return pt, nil
}

// minSyncZero times endpoint changes again with kube-proxy's minimum sync
// period at 0 (restarted so; its caller stops it). netcube's figures are
// copied: it has no such period.
func (c *cluster) minSyncZero(p peer, pt *PeerPoint, cfg CompareConfig) error {
	kp, ok := p.(*KubeProxy)
	if !ok {
		for i := range pt.Families {
			f := &pt.Families[i]
			f.MinSyncZeroUpMs, f.MinSyncZeroDownMs = f.ReactionUpMs, f.ReactionDownMs
		}
		return nil
	}
	if err := kp.stop(); err != nil {
		return err
	}
	kp.MinSyncZero = true
	defer func() { kp.MinSyncZero = false }()
	if err := kp.start(); err != nil {
		return err
	}
	alive := func() bool { return kp.pid() != 0 && processAlive(kp.pid()) }
	if err := c.waitServing(cfg.SyncTimeout, alive); err != nil {
		return fmt.Errorf("full sync with min-sync-period 0: %w", err)
	}
	for i, f := range c.families() {
		ff := &pt.Families[i]
		for range cfg.Reactions {
			up, down, err := c.reaction(f, cfg.SyncTimeout)
			if err != nil {
				return err
			}
			ff.MinSyncZeroUpMs, ff.MinSyncZeroDownMs = append(ff.MinSyncZeroUpMs, ms(up)), append(ff.MinSyncZeroDownMs, ms(down))
		}
		fmt.Fprintf(cfg.Log, "     %s, min-sync-period 0: endpoint added -> reached %v ms, removed -> left %v ms\n", f.name, ff.MinSyncZeroUpMs, ff.MinSyncZeroDownMs)
	}
	return nil
}

// onlyR1: 20 requests in a row are all answered by r1.
func onlyR1(c *cluster, f family) bool {
	for range 20 {
		if !c.answers(hostPort(f.churn, churnPort), c.r1.Name) {
			return false
		}
	}
	return true
}

// steady measures one run of throughput, request/response and connection
// rate, pod->pod and through the Service, back to back.
func (c *cluster) steady(f family, d time.Duration) (Run, error) {
	r := Run{Bulk: map[string]float64{}, RR: map[string]traffic.Summary{}, CRR: map[string]traffic.Summary{}}
	for _, streams := range []int{1, 4} {
		for _, b := range []struct {
			path, from, host, src string
			port                  int
		}{
			{pathDirect, c.client.Name, f.server, f.directSrc, iperfPort},
			{pathService, c.client.Name, f.bench, "", iperfPort},
			{pathNodePort, c.sb.Topology.External.Name, f.nodeIP, "", iperfNodePort},
		} {
			g, err := bulk(c.sb, b.from, b.host, b.port, streams, b.src, d)
			if err != nil {
				return r, err
			}
			r.Bulk[fmt.Sprintf("%s x%d", b.path, streams)] = g
		}
	}
	for _, t := range []struct {
		path, addr, src string
	}{
		{pathDirect, hostPort(f.server, rrPort), f.directSrc},
		{pathService, hostPort(f.bench, 80), ""},
	} {
		for _, persistent := range []bool{true, false} {
			s, err := requests(c.sb, c.binDir, c.client.Name, t.addr, persistent, t.src, d)
			if err != nil {
				return r, err
			}
			if persistent {
				r.RR[t.path] = s
			} else {
				r.CRR[t.path] = s
			}
		}
	}
	return r, nil
}

func (r Run) String() string {
	return fmt.Sprintf("bulk %.1f/%.1f/%.1f Gbit/s (pod, Service, NodePort), rr p99 %.1f/%.1f µs, %.0f/%.0f conn/s (pod, Service), errors %d",
		r.Bulk[pathDirect+" x1"], r.Bulk[pathService+" x1"], r.Bulk[pathNodePort+" x1"],
		r.RR[pathDirect].P99, r.RR[pathService].P99, r.CRR[pathDirect].PerSec, r.CRR[pathService].PerSec,
		r.RR[pathService].Errors+r.CRR[pathService].Errors+r.RR[pathDirect].Errors+r.CRR[pathDirect].Errors)
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil && !isZombie(pid)
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the state follows the command name
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}
