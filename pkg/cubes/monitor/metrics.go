package monitor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/events"
)

// metrics reads the datapath's counters when scraped: drops by reason
// (monitor_drops), events written and lost (monitor_stats), and the events
// subscribers had no room for (the hub).
type metrics struct {
	drops, stats cube.Map
	hub          *events.Hub
	verdicts     *prometheus.CounterVec
	// counters caches verdicts' children: count runs once per event, on
	// the reader's goroutine alone.
	counters   map[[2]string]prometheus.Counter
	dropsDesc  *prometheus.Desc
	eventsDesc *prometheus.Desc
	clientDesc *prometheus.Desc
}

func newMetrics(maps *cube.Maps, hub *events.Hub) *metrics {
	return &metrics{
		drops: maps.Map(MapDrops), stats: maps.Map(MapStats), hub: hub, counters: map[[2]string]prometheus.Counter{},
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netcube_flows_total",
			Help: "Flows the datapath reported, by verdict: dropped (each dropped packet) or forwarded (a connection a policy allowed, a flow a cube translated; trace and policy events only)."},
			[]string{"verdict", "cube"}),
		dropsDesc: prometheus.NewDesc("netcube_drops_total",
			"Packets the datapath dropped (or refused: no-endpoints), by reason and the cube that decided. Always counted, events or not.",
			[]string{"reason", "cube"}, nil),
		eventsDesc: prometheus.NewDesc("netcube_monitor_events_total",
			"Monitor events of the datapath: written to the ring buffer (sent), or lost because it was full (lost); packets are never lost for it.",
			[]string{"result"}, nil),
		clientDesc: prometheus.NewDesc("netcube_monitor_subscriber_lost_total",
			"Events the agent read that a subscriber (netcube monitor, a Hubble client) had no room for.", nil, nil),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.dropsDesc
	ch <- m.eventsDesc
	ch <- m.clientDesc
	m.verdicts.Describe(ch)
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, d := range events.DropReasons() {
		r := events.DropReason(d)
		ch <- prometheus.MustNewConstMetric(m.dropsDesc, prometheus.CounterValue, float64(cube.PerCPUSum(m.drops, uint32(d))), r.Name, r.Cube)
	}
	ch <- prometheus.MustNewConstMetric(m.eventsDesc, prometheus.CounterValue, float64(cube.PerCPUSum(m.stats, uint32(datapath.MonStatSent))), "sent")
	ch <- prometheus.MustNewConstMetric(m.eventsDesc, prometheus.CounterValue, float64(cube.PerCPUSum(m.stats, uint32(datapath.MonStatLost))), "lost")
	ch <- prometheus.MustNewConstMetric(m.clientDesc, prometheus.CounterValue, float64(m.hub.Lost()))
	m.verdicts.Collect(ch)
}

// count records an event's verdict.
func (m *metrics) count(e events.Event) {
	verdict := "forwarded"
	if e.Type == "drop" {
		verdict = "dropped"
	}
	k := [2]string{verdict, e.Cube}
	c, ok := m.counters[k]
	if !ok {
		c = m.verdicts.WithLabelValues(verdict, e.Cube)
		m.counters[k] = c
	}
	c.Inc()
}
