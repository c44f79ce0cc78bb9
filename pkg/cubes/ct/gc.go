package ct

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// GC removes conntrack's timed-out entries: it runs the datapath's own
// sweep (bpf/entry/ct_gc.c, which decides with the datapath's rule,
// ct_expired) over the table, and keeps the table's metrics.
type GC struct {
	prog     *ebpf.Program
	stats    cube.Map
	capacity uint32

	entries  prometheus.Gauge
	pressure prometheus.Gauge
	removed  prometheus.Counter
	seconds  prometheus.Histogram
}

// NewGC is the collector of the table flows (a kernel map) with the
// sweep program prog; stats is ct_stats.
func NewGC(prog *ebpf.Program, flows cube.Map, stats cube.Map) (*GC, error) {
	if _, ok := flows.(interface{ Unwrap() *ebpf.Map }); !ok || prog == nil {
		return nil, fmt.Errorf("conntrack GC needs the kernel's %s map and the ct_gc program", MapFlows)
	}
	g := &GC{prog: prog, stats: stats, capacity: flows.MaxEntries(),
		entries: prometheus.NewGauge(prometheus.GaugeOpts{Name: "netcube_conntrack_entries",
			Help: "Conntrack entries at the last GC sweep (two per translated flow)."}),
		pressure: prometheus.NewGauge(prometheus.GaugeOpts{Name: "netcube_conntrack_pressure",
			Help: "Conntrack entries over the table's size at the last sweep: at 1, new flows are refused (netcube_conntrack_insert_failures_total; raise --ct-map-size)."}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{Name: "netcube_conntrack_gc_removed_total",
			Help: "Timed-out conntrack entries the GC removed."}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "netcube_conntrack_gc_seconds",
			Help: "Duration of a conntrack GC sweep.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}),
	}
	return g, nil
}

// Sweep removes every timed-out entry once, and says how many entries it
// saw and removed.
func (g *GC) Sweep() (datapath.CTGCResult, error) {
	var res datapath.CTGCResult
	start := time.Now()
	// The program writes its totals over the packet it runs on; a tc
	// program needs at least an Ethernet header's worth of one.
	out := make([]byte, 64)
	ret, err := g.prog.Run(&ebpf.RunOptions{Data: make([]byte, 64), DataOut: out})
	if err != nil {
		return res, fmt.Errorf("conntrack GC sweep: %w", err)
	}
	if ret != tcActOK {
		return res, fmt.Errorf("conntrack GC sweep: the program returned %d", ret)
	}
	if err := binary.Read(bytes.NewReader(out), binary.NativeEndian, &res); err != nil {
		return res, fmt.Errorf("conntrack GC sweep: result: %w", err)
	}
	g.seconds.Observe(time.Since(start).Seconds())
	g.removed.Add(float64(res.Removed))
	left := res.Seen - res.Removed
	g.entries.Set(float64(left))
	g.pressure.Set(float64(left) / float64(g.capacity))
	return res, nil
}

// tcActOK is TC_ACT_OK, what the sweep returns when it has written its
// totals.
const tcActOK = 0

// Run sweeps every interval until ctx ends.
func (g *GC) Run(ctx context.Context, interval time.Duration) {
	cube.Every(ctx, interval, func() {
		res, err := g.Sweep()
		if err != nil {
			slog.Error("conntrack GC", "err", err)
			return
		}
		if res.Removed > 0 {
			slog.Debug("conntrack GC", "entries", res.Seen-res.Removed, "removed", res.Removed)
		}
	})
}

// Metrics are the table's gauges and counters: the GC's, and the
// datapath's own (ct_stats: flows written, closed, not written, evicted).
func (g *GC) Metrics() []prometheus.Collector {
	stat := func(name, help string, s datapath.CTStat) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 {
			return float64(cube.PerCPUSum(g.stats, uint32(s)))
		})
	}
	return []prometheus.Collector{g.entries, g.pressure, g.removed, g.seconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "netcube_conntrack_capacity",
			Help: "Entries the conntrack table holds (--ct-map-size)."}, func() float64 { return float64(g.capacity) }),
		stat("netcube_conntrack_flows_created_total", "Flows the datapath wrote to conntrack.", datapath.CTStatCreated),
		stat("netcube_conntrack_flows_closed_total", "Flows the datapath removed at their close (RST, or the last ACK).", datapath.CTStatClosed),
		stat("netcube_conntrack_insert_failures_total", "Flows the datapath could not write to conntrack.", datapath.CTStatInsertFailed),
		stat("netcube_conntrack_early_drops_total", "Flows not yet answered that the datapath removed from a full conntrack table to hold a new one.", datapath.CTStatEarlyDrop),
	}
}
