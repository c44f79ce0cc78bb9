package agent

// The election's metrics: what a node's operator reads to see addresses
// move, and what bench scale-l2 reads of its hollow agents (heartbeats
// per second, takeovers, when every agent saw a node die).

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/l2announce"
)

// l2Metrics counts the takeovers; the rest is read from the elector and
// its membership when scraped.
type l2Metrics struct {
	takeovers    atomic.Uint64
	lastTakeover atomic.Int64 // unix nanoseconds; 0: none yet
}

func newL2Metrics() *l2Metrics { return &l2Metrics{} }

// counting wraps the elector's announce function (the gratuitous ARP, or
// nothing on a hollow agent) to count each takeover first.
func (l *l2Metrics) counting(announce func(netip.Addr)) func(netip.Addr) {
	return func(ip netip.Addr) {
		l.takeovers.Add(1)
		l.lastTakeover.Store(time.Now().UnixNano())
		announce(ip)
	}
}

func (l *l2Metrics) register(reg prometheus.Registerer, el *l2announce.Elector) error {
	m := el.Membership()
	seconds := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	heard := func(accepted bool) func() float64 {
		return func() float64 {
			a, r := m.Counters()
			if accepted {
				return float64(a)
			}
			return float64(r)
		}
	}
	cs := []prometheus.Collector{
		counter("netcube_l2_takeovers_total", "LoadBalancer IPs this node became the announcer of (each a gratuitous ARP or unsolicited NA; a hollow agent sends none).",
			func() float64 { return float64(l.takeovers.Load()) }),
		gauge("netcube_l2_last_takeover_timestamp_seconds", "When this node last became the announcer of an address (0: never).",
			func() float64 { return float64(l.lastTakeover.Load()) / 1e9 }),
		gauge("netcube_l2_announcing", "LoadBalancer IPs this node announces now.", func() float64 { return float64(len(el.Announcing())) }),
		gauge("netcube_l2_alive_nodes", "Nodes this node counts alive, itself included.", func() float64 { return float64(len(m.Alive())) }),
		counter("netcube_l2_alive_changes_total", "Times the alive nodes changed.", func() float64 { n, _ := m.Changed(); return float64(n) }),
		gauge("netcube_l2_alive_changed_timestamp_seconds", "When the alive nodes last changed (0: never).", func() float64 { _, t := m.Changed(); return seconds(t) }),
		counter("netcube_l2_heartbeats_sent_total", "Heartbeats sent, one per address of another node.", func() float64 { return float64(m.Sent()) }),
		counter("netcube_l2_heartbeats_accepted_total", "Heartbeats taken from another node.", heard(true)),
		counter("netcube_l2_heartbeats_refused_total", "Datagrams on the heartbeat port refused (not a heartbeat, an unknown node, or a source its Node does not list).", heard(false)),
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
