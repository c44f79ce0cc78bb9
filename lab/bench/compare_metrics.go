package bench

// The compare report's figures: each metric, where its samples come from
// in a point, and the ratios between data planes.

import (
	"slices"

	"github.com/netcube/netcube/lab/traffic"
)

// cmpMetric is one figure of the report, for one family.
type cmpMetric struct {
	file, title  string
	higherBetter bool
	format       string
	get          func(PeerPoint, int) []float64 // samples (runs) of a point, family index
	direct       func(PeerPoint, int) []float64 // the pod->pod counterpart, if any
}

func runs(f func(Run) float64) func(PeerPoint, int) []float64 {
	return func(p PeerPoint, fam int) []float64 {
		if fam >= len(p.Families) {
			return nil
		}
		var out []float64
		for _, r := range p.Families[fam].Runs {
			if v := f(r); v != 0 {
				out = append(out, v)
			}
		}
		return out
	}
}

func rr(path string, f func(traffic.Summary) float64) func(PeerPoint, int) []float64 {
	return runs(func(r Run) float64 { return f(r.RR[path]) })
}

func crr(path string, f func(traffic.Summary) float64) func(PeerPoint, int) []float64 {
	return runs(func(r Run) float64 { return f(r.CRR[path]) })
}

func bulkOf(path string) func(PeerPoint, int) []float64 {
	return runs(func(r Run) float64 { return r.Bulk[path] })
}

func famField(f func(FamilyFigures) []float64) func(PeerPoint, int) []float64 {
	return func(p PeerPoint, fam int) []float64 {
		if fam >= len(p.Families) {
			return nil
		}
		return f(p.Families[fam])
	}
}

// churnOf reads a figure of the rolling update, or nothing where it was not
// run (kube-proxy above --kube-proxy-changes-max): a run that sent no
// request and saw no error did not happen, and must not read as 0 errors.
func churnOf(f func(traffic.Summary) float64) func(PeerPoint, int) []float64 {
	return famField(func(ff FamilyFigures) []float64 {
		if ff.Churn.Requests == 0 && ff.Churn.Errors == 0 {
			return nil
		}
		return []float64{f(ff.Churn)}
	})
}

func pointField(f func(PeerPoint) float64) func(PeerPoint, int) []float64 {
	return func(p PeerPoint, _ int) []float64 { return []float64{f(p)} }
}

var (
	p50  = func(s traffic.Summary) float64 { return s.P50 }
	p90  = func(s traffic.Summary) float64 { return s.P90 }
	p99  = func(s traffic.Summary) float64 { return s.P99 }
	p999 = func(s traffic.Summary) float64 { return s.P999 }
	maxL = func(s traffic.Summary) float64 { return s.Max }
	sdev = func(s traffic.Summary) float64 { return s.StdDev }
	rate = func(s traffic.Summary) float64 { return s.PerSec }
)

var cmpMetrics = []cmpMetric{
	{"full-sync", "a. Full sync: start → every Service programmed (s; netcube: until its initial sync is applied, the last Service included)", false, "%.2f", pointField(func(p PeerPoint) float64 { return p.FullSyncS }), nil},
	{"entries", "a. Rules (iptables/nftables, with set and map elements) or BPF map entries installed", false, "%.0f", pointField(func(p PeerPoint) float64 { return float64(p.Entries) }), nil},
	{"endpoint-change", "a/f. One endpoint added → traffic reaches it (ms)", false, "%.1f", famField(func(f FamilyFigures) []float64 { return f.ReactionUpMs }), nil},
	{"endpoint-removed", "f. One endpoint removed → traffic no longer reaches it (ms)", false, "%.1f", famField(func(f FamilyFigures) []float64 { return f.ReactionDownMs }), nil},
	{"endpoint-change-minsync0", "f. One endpoint added → traffic reaches it, kube-proxy with its minimum sync period at 0 instead of the shipped 1 s (ms; netcube has no such period: its figure again)", false, "%.1f", famField(func(f FamilyFigures) []float64 { return f.MinSyncZeroUpMs }), nil},
	{"endpoint-removed-minsync0", "f. One endpoint removed → traffic no longer reaches it, kube-proxy's minimum sync period at 0 (ms)", false, "%.1f", famField(func(f FamilyFigures) []float64 { return f.MinSyncZeroDownMs }), nil},
	{"cpu", "a. Proxy CPU seconds over the point (sync, measurements, changes; with iptables/nft child processes)", false, "%.1f", pointField(func(p PeerPoint) float64 { return p.CPUSeconds }), nil},
	{"rss", "a. Proxy peak RSS (MB)", false, "%.0f", pointField(func(p PeerPoint) float64 { return p.PeakRSSMB }), nil},
	{"bulk-1", "b. TCP bulk throughput, 1 stream, pod→ClusterIP (Gbit/s)", true, "%.2f", bulkOf(pathService + " x1"), bulkOf(pathDirect + " x1")},
	{"bulk-4", "b. TCP bulk throughput, 4 streams, pod→ClusterIP (Gbit/s)", true, "%.2f", bulkOf(pathService + " x4"), bulkOf(pathDirect + " x4")},
	{"nodeport-1", "b. TCP bulk throughput, 1 stream, external client→NodePort (Gbit/s)", true, "%.2f", bulkOf(pathNodePort + " x1"), nil},
	{"nodeport-4", "b. TCP bulk throughput, 4 streams, external client→NodePort (Gbit/s)", true, "%.2f", bulkOf(pathNodePort + " x4"), nil},
	{"rr-p50", "c. Request/response latency p50, pod→ClusterIP (µs)", false, "%.1f", rr(pathService, p50), rr(pathDirect, p50)},
	{"rr-p90", "c. Request/response latency p90 (µs)", false, "%.1f", rr(pathService, p90), rr(pathDirect, p90)},
	{"rr-p99", "c. Request/response latency p99 (µs)", false, "%.1f", rr(pathService, p99), rr(pathDirect, p99)},
	{"rr-p999", "c. Request/response latency p99.9 (µs)", false, "%.1f", rr(pathService, p999), rr(pathDirect, p999)},
	{"rr-max", "c. Request/response latency maximum (µs)", false, "%.0f", rr(pathService, maxL), rr(pathDirect, maxL)},
	{"rr-stddev", "c. Request/response latency standard deviation (µs)", false, "%.2f", rr(pathService, sdev), rr(pathDirect, sdev)},
	{"ttfb-p50", "c. Time to first byte of a new connection, p50 (µs)", false, "%.1f", crr(pathService, p50), crr(pathDirect, p50)},
	{"ttfb-p99", "c. Time to first byte of a new connection, p99 (µs)", false, "%.1f", crr(pathService, p99), crr(pathDirect, p99)},
	{"ttfb-stddev", "c. Time to first byte of a new connection, standard deviation (µs)", false, "%.2f", crr(pathService, sdev), crr(pathDirect, sdev)},
	{"conn-rate", "d. New connections per second, measured Service last in rule order", true, "%.0f", crr(pathService, rate), crr(pathDirect, rate)},
	{"conn-rate-first", "d. New connections per second, measured Service first in rule order (iptables only)", true, "%.0f", crr(pathFirst, rate), crr(pathDirect, rate)},
	{"rr-rate", "d. Requests per second on a long connection", true, "%.0f", rr(pathService, rate), rr(pathDirect, rate)},
	{"churn-errors", "e. Client errors during a rolling update (requests on new connections)", false, "%.0f", churnOf(func(c traffic.Summary) float64 { return float64(c.Errors) }), nil},
	{"churn-p99", "e. Request latency p99 during a rolling update (µs)", false, "%.0f", churnOf(func(c traffic.Summary) float64 { return c.P99 }), nil},
	{"churn-max", "e. Request latency maximum during a rolling update (µs)", false, "%.0f", churnOf(func(c traffic.Summary) float64 { return c.Max }), nil},
}

// familyIndependent metrics are the same for both families (one process, one sync).
func (m cmpMetric) familyIndependent() bool {
	return slices.Contains([]string{"full-sync", "entries", "cpu", "rss"}, m.file)
}

func med(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func metricByFile(file string) cmpMetric {
	for _, m := range cmpMetrics {
		if m.file == file {
			return m
		}
	}
	panic("no metric " + file)
}

// ratio of netcube's median to a peer's at size n, family fam.
func (r *CompareReport) ratio(file, peer string, n, fam int) (float64, bool) {
	m := metricByFile(file)
	a, ok1 := r.point("netcube", n)
	p, ok2 := r.point(peer, n)
	if !ok1 || !ok2 {
		return 0, false
	}
	// A figure not measured (no runs) is missing, never 0: a ratio of 0
	// would pass every "at most" target.
	x, y := med(m.get(a, fam)), med(m.get(p, fam))
	if x == 0 || y == 0 {
		return 0, false
	}
	return x / y, true
}
