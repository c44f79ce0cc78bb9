package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

type metric struct {
	name         string
	get          func(Measurement) float64
	higherBetter bool
	format       string
}

var metrics = []metric{
	{"TCP throughput (Gbit/s, iperf3)", func(m Measurement) float64 { return m.TCPGbps }, true, "%.2f"},
	{"request/response (trans/s)", func(m Measurement) float64 { return m.RRPerSec }, true, "%.0f"},
	{"request/response p50 (µs)", func(m Measurement) float64 { return m.RRP50 }, false, "%.1f"},
	{"request/response p99 (µs)", func(m Measurement) float64 { return m.RRP99 }, false, "%.1f"},
	{"new connections/s", func(m Measurement) float64 { return m.CRRPerS }, true, "%.0f"},
	{"BPF program runs per request/response (bpf_stats)", func(m Measurement) float64 { return m.BPFRunsPerRR }, false, "%.2f"},
	{"BPF time per request/response (ns, bpf_stats)", func(m Measurement) float64 { return m.BPFNsPerRR }, false, "%.0f"},
	{"failed requests (sum of runs)", nil, false, "%.0f"},
}

// Markdown renders the results as a report: medians, and the Service path
// relative to pod->pod (a cost: positive is worse).
func Markdown(cfg DatapathConfig, results []Result) string {
	var b strings.Builder
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	fmt.Fprintf(&b, "# netcube datapath: pod→Service vs pod→pod\n\n")
	fmt.Fprintf(&b, "Measured %s, netcube %s, on %s (kernel %s, %d CPUs); %d runs of %s per figure, medians; ",
		cfg.MeasuredAt.UTC().Format("2006-01-02 15:04 UTC"), commitName(cfg.Commit), unix.ByteSliceToString(uts.Nodename[:]),
		unix.ByteSliceToString(uts.Release[:]), runtime.NumCPU(), cfg.Runs, cfg.Duration)
	fmt.Fprintf(&b, "pod→pod and pod→Service alternate back to back. Backend on the client's node; ")
	fmt.Fprintf(&b, "request/response (one connection, 1 byte each way) and new connections by ncperf (C), client and server pinned to CPU 1; iperf3 client CPU 0 / server CPU 1. ")
	fmt.Fprintf(&b, "The BPF rows: netcube's programs (every node's tc programs and socket hooks), their runs and run time per request/response by the kernel's bpf_stats, in a 1 s run of their own (the statistics cost two clock reads per program run).\n")
	fmt.Fprintf(&b, "Cost = how much worse pod→Service is than pod→pod (targets: ≤ 2%% with socket-LB, ≤ 5%% tc path only).\n\n")
	for _, r := range results {
		path := "socket-LB on"
		if !r.SocketLB {
			path = "socket-LB off (tc path only)"
		}
		fmt.Fprintf(&b, "## %s, %s\n\n| metric | pod→pod median [min–max] | pod→Service median [min–max] | cost of medians |\n|---|---:|---:|---:|\n", path, r.Family)
		for _, m := range metrics {
			if m.get == nil {
				fmt.Fprintf(&b, "| %s | %d | %d | |\n", m.name, errorsOf(r.Direct), errorsOf(r.Service))
				continue
			}
			d, s := median(r.Direct, m.get), median(r.Service, m.get)
			cost := 0.0
			if d != 0 {
				if m.higherBetter {
					cost = (d - s) / d * 100
				} else {
					cost = (s - d) / d * 100
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %+.1f%% |\n", m.name, spread(r.Direct, m), spread(r.Service, m), cost)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Reproduce: `make bench` (`bin/netcube-lab bench datapath --duration %s --runs %d`).\n", cfg.Duration, cfg.Runs)
	return b.String()
}

func writeReport(cfg DatapathConfig, results []Result) error {
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return err
	}
	j, _ := json.MarshalIndent(map[string]any{
		"commit": cfg.Commit, "measured_at": cfg.MeasuredAt.UTC(), "duration_s": cfg.Duration.Seconds(), "runs": cfg.Runs, "results": results,
	}, "", "  ")
	if err := os.WriteFile(filepath.Join(cfg.OutDir, "datapath.json"), j, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.OutDir, "datapath.md"), []byte(Markdown(cfg, results)), 0o644)
}

func errorsOf(ms []Measurement) int {
	n := 0
	for _, m := range ms {
		n += m.Errors
	}
	return n
}

// spread renders a metric's median with the range of the runs: on a shared
// machine the range says how much of a difference is noise.
func spread(ms []Measurement, m metric) string {
	lo, hi := m.get(ms[0]), m.get(ms[0])
	for _, x := range ms {
		lo, hi = min(lo, m.get(x)), max(hi, m.get(x))
	}
	f := m.format
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", median(ms, m.get), lo, hi)
}
