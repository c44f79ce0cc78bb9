package bench

// The SYN flood: a host outside the cluster sends SYNs from spoofed
// sources to a NodePort, faster than the SYN timeout lets conntrack
// forget them, while connections established before it keep talking and
// new ones keep arriving. Measured with conntrack's early drop off and
// on, alternating, each in a sandbox of its own (the agent's flag).

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
	"strconv"
	"sync"
	"time"

	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/datapath"
)

// SynFloodConfig is one `netcube-lab bench synflood`.
type SynFloodConfig struct {
	BinDir    string
	OutDir    string // "": no report files
	Log       io.Writer
	Runs      int           // each: early drop off, then on
	TableSize int           // node1's conntrack entries (--ct-map-size)
	Rate      float64       // spoofed SYNs a second
	Duration  time.Duration // of the flood
	Held      int           // connections established before the flood
	NewEvery  time.Duration // a new connection this often, from the start of the flood to its end
}

// SynFloodRun is one flood against one node.
type SynFloodRun struct {
	Run       int  `json:"run"`
	EarlyDrop bool `json:"early_drop"`
	// The flood as sent (the sender's own refusals apart).
	Sent       int     `json:"syns_sent"`
	SendErrors int     `json:"send_errors"`
	Seconds    float64 `json:"flood_s"`
	// Held: the connections established before the flood, as answering at
	// its end; HeldLostMax: the most found not answering in any check
	// during it (one a second).
	Held        int `json:"held"`
	HeldLost    int `json:"held_lost"`
	HeldLostMax int `json:"held_lost_max_during"`
	// New connections opened during the flood, and how many failed.
	New       int     `json:"new_connections"`
	NewFailed int     `json:"new_failed"`
	NewP50Ms  float64 `json:"new_p50_ms"`
	NewP99Ms  float64 `json:"new_p99_ms"`
	// NewErrors: the first failures, when and why (the client's socket
	// as the kernel saw it).
	NewErrors []string `json:"new_errors,omitempty"`
	// Node1's conntrack counters at the end: flows given up for new ones,
	// and flows not written (the table full).
	EarlyDrops   uint64 `json:"early_drops"`
	InsertFailed uint64 `json:"insert_failed"`
	// PerSecond: second by second, new connections served and failed and
	// held connections answering.
	PerSecond []SynFloodSecond `json:"per_second"`
}

// SynFloodSecond is one second of a flood.
type SynFloodSecond struct {
	Second    int `json:"s"`
	NewOK     int `json:"new_ok"`
	NewFailed int `json:"new_failed"`
	Held      int `json:"held"`
}

// SynFloodReport is docs/benchmarks/synflood.{json,md}.
type SynFloodReport struct {
	RunHeader
	TableSize int           `json:"ct_entries"`
	Rate      float64       `json:"syn_rate"`
	HeldConns int           `json:"held_connections"`
	NewEveryS float64       `json:"new_every_s"`
	Results   []SynFloodRun `json:"results"`
}

const (
	floodNodePort  = 30190
	floodService   = "flood"
	floodClusterIP = "10.96.0.190"
)

// SynFlood runs the flood cfg.Runs times with early drop off and on,
// alternating, and writes the report.
func SynFlood(cfg SynFloodConfig) (*SynFloodReport, error) {
	if cfg.Runs < 1 || cfg.Rate <= 0 || cfg.Duration < 2*time.Second || cfg.Held < 1 || cfg.NewEvery <= 0 || cfg.TableSize < 1024 {
		return nil, errors.New("bench synflood: --runs ≥ 1, --rate > 0, --duration ≥ 2s, --held ≥ 1, --new-every > 0, --ct-entries ≥ 1024")
	}
	rep := &SynFloodReport{
		RunHeader: newRunHeader(cfg.Runs, cfg.Duration, fmt.Sprintf("netcube-lab bench synflood --runs %d --ct-entries %d --rate %g --duration %s --held %d --new-every %s",
			cfg.Runs, cfg.TableSize, cfg.Rate, cfg.Duration, cfg.Held, cfg.NewEvery)),
		TableSize: cfg.TableSize, Rate: cfg.Rate, HeldConns: cfg.Held, NewEveryS: cfg.NewEvery.Seconds(),
	}
	for run := 1; run <= cfg.Runs; run++ {
		for _, early := range []bool{false, true} {
			fmt.Fprintf(cfg.Log, "== run %d/%d, early drop %v: %g SYNs/s for %s at %d conntrack entries\n", run, cfg.Runs, early, cfg.Rate, cfg.Duration, cfg.TableSize)
			r, err := synFloodOnce(cfg, early)
			if err != nil {
				return nil, fmt.Errorf("run %d, early drop %v: %w", run, early, err)
			}
			r.Run = run
			fmt.Fprintf(cfg.Log, "   %d SYNs sent; held %d/%d (lost at most %d during); new %d, failed %d, p50 %.2f ms p99 %.2f ms; early drops %d, not written %d\n",
				r.Sent, r.Held, cfg.Held, r.HeldLostMax, r.New, r.NewFailed, r.NewP50Ms, r.NewP99Ms, r.EarlyDrops, r.InsertFailed)
			rep.Results = append(rep.Results, r)
		}
	}
	if cfg.OutDir != "" {
		if err := rep.Write(cfg.OutDir); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

func synFloodOnce(cfg SynFloodConfig, earlyDrop bool) (SynFloodRun, error) {
	r := SynFloodRun{EarlyDrop: earlyDrop}
	const name = "bench-syn"
	_ = sandbox.Down(name, io.Discard)
	sb, err := sandbox.Up(sandbox.Config{Name: name, Nodes: 2, PodsPerNode: 1, BinDir: cfg.BinDir,
		AgentArgs: []string{"--ct-map-size=" + strconv.Itoa(cfg.TableSize), "--conntrack-early-drop=" + strconv.FormatBool(earlyDrop)}}, io.Discard)
	if err != nil {
		return r, err
	}
	defer func() { _ = sandbox.Down(name, io.Discard) }()
	top := sb.Topology
	node := top.Nodes[0]
	if err := top.WriteManifest("flood.yaml", floodServiceYAML(node.Pods)); err != nil {
		return r, err
	}
	addr := netip.AddrPortFrom(node.IP4, floodNodePort).String()
	lab := filepath.Join(cfg.BinDir, sandbox.LabBinary)
	if err := waitAnswers(sb, lab, addr, 30*time.Second); err != nil {
		return r, err
	}
	h, open, err := sb.StartHold(lab, top.External.Name, "tcp", addr, cfg.Held)
	if err != nil {
		return r, err
	}
	defer h.Close()
	if open.Held != cfg.Held {
		return r, fmt.Errorf("opening %d connections before the flood: %+v", cfg.Held, open)
	}

	start := time.Now()
	second := func() int { return int(time.Since(start) / time.Second) }
	secs := make([]SynFloodSecond, int(cfg.Duration/time.Second)+1)
	for i := range secs {
		secs[i].Second = i
	}
	var mu sync.Mutex
	var lat []float64

	// New connections, one every NewEvery, each its own TCP handshake.
	prober := exec.Command(lab, "pod", "request", "--count", "0", "--interval", cfg.NewEvery.String(), "--timeout", "1s", addr)
	probeOut, err := prober.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := sb.Start(top.External.Name, prober); err != nil {
		return r, err
	}
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		sc := bufio.NewScanner(probeOut)
		for sc.Scan() {
			var res traffic.Result
			if json.Unmarshal(sc.Bytes(), &res) != nil {
				continue
			}
			mu.Lock()
			if s := second(); s < len(secs) {
				r.New++
				if res.Err != "" {
					r.NewFailed++
					if len(r.NewErrors) < 5 {
						r.NewErrors = append(r.NewErrors, fmt.Sprintf("at %d s: %s (%s; %s)", s, res.Err, res.Local, res.TCP))
					}
					secs[s].NewFailed++
				} else {
					secs[s].NewOK++
					lat = append(lat, res.Micros/1e3)
				}
			}
			mu.Unlock()
		}
	}()
	stopProber := func() {
		_ = prober.Process.Kill()
		<-probed
		_ = prober.Wait()
	}
	defer func() {
		if prober.ProcessState == nil {
			stopProber()
		}
	}()

	// The flood.
	flood := exec.Command(lab, "pod", "synflood", "--rate", fmt.Sprint(cfg.Rate), "--for", cfg.Duration.String(), addr)
	floodOut, err := flood.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := sb.Start(top.External.Name, flood); err != nil {
		return r, err
	}
	var last traffic.FloodReport
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		sc := bufio.NewScanner(floodOut)
		for sc.Scan() {
			var fr traffic.FloodReport
			if json.Unmarshal(sc.Bytes(), &fr) == nil {
				last = fr
			}
		}
	}()

	// The held connections, checked once a second while the flood runs.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-flooded:
			done = true
		case <-tick.C:
			c, err := h.Check()
			if err != nil {
				return r, err
			}
			mu.Lock()
			if s := second(); s < len(secs) {
				secs[s].Held = c.Held
			}
			mu.Unlock()
			r.HeldLostMax = max(r.HeldLostMax, cfg.Held-c.Held)
		}
	}
	if err := flood.Wait(); err != nil {
		return r, fmt.Errorf("netcube-lab pod synflood: %w", err)
	}
	stopProber()
	if !last.Done {
		return r, errors.New("netcube-lab pod synflood ended without its report")
	}
	r.Sent, r.SendErrors, r.Seconds = last.Sent, last.Errors, last.Seconds
	end, err := h.Check()
	if err != nil {
		return r, err
	}
	r.Held, r.HeldLost = end.Held, cfg.Held-end.Held
	r.HeldLostMax = max(r.HeldLostMax, r.HeldLost)
	r.PerSecond = secs[:len(secs)-1]
	slices.Sort(lat)
	r.NewP50Ms, r.NewP99Ms = quantile(lat, 0.5), quantile(lat, 0.99)
	maps, closeMaps, err := datapath.OpenPinned(node.PinDir)
	if err != nil {
		return r, err
	}
	defer closeMaps()
	r.EarlyDrops = cube.PerCPUSum(maps.Map(ct.MapStats), uint32(datapath.CTStatEarlyDrop))
	r.InsertFailed = cube.PerCPUSum(maps.Map(ct.MapStats), uint32(datapath.CTStatInsertFailed))
	return r, nil
}

// waitAnswers waits until the host outside gets an answer from addr.
func waitAnswers(sb *sandbox.Sandbox, lab, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := sb.Output(sb.Topology.External.Name, lab, "pod", "request", "--timeout", "300ms", addr)
		var res traffic.Result
		if err == nil && json.Unmarshal(out, &res) == nil && res.Err == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no answer from outside within %s", addr, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// floodServiceYAML is the flooded NodePort: externalTrafficPolicy Local,
// so node1 keeps the client's address and serves it from its own pod.
func floodServiceYAML(pods []sandbox.Pod) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: default
spec:
  type: NodePort
  externalTrafficPolicy: Local
  ipFamilies: [IPv4]
  clusterIP: %s
  clusterIPs: [%s]
  ports:
  - {name: http, port: 80, protocol: TCP, targetPort: http, nodePort: %d}
---
`, floodService, floodClusterIP, floodClusterIP, floodNodePort) + sandbox.SliceYAML(floodService, false, sandbox.EndpointPorts[:1], pods)
}
