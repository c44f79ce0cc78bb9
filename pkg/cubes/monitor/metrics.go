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
	drops, stats, cubes, xdp cube.Map
	hub                      *events.Hub
	verdicts                 *prometheus.CounterVec
	// counters caches verdicts' children: count runs once per event, on
	// the reader's goroutine alone.
	counters   map[[2]string]prometheus.Counter
	dropsDesc  *prometheus.Desc
	eventsDesc *prometheus.Desc
	clientDesc *prometheus.Desc
	packetDesc *prometheus.Desc
	byteDesc   *prometheus.Desc
	xdpDesc    *prometheus.Desc
}

// xdpActions names what the XDP program did, by monitor_xdp's key.
var xdpActions = map[datapath.MonXDP]string{
	datapath.MonXDPPassed:    "passed",
	datapath.MonXDPForwarded: "forwarded",
	datapath.MonXDPDropped:   "dropped",
}

func newMetrics(maps *cube.Maps, hub *events.Hub) *metrics {
	return &metrics{
		drops: maps.Map(MapDrops), stats: maps.Map(MapStats), cubes: maps.Map(MapCubes), xdp: maps.Map(MapXDP), hub: hub, counters: map[[2]string]prometheus.Counter{},
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
		packetDesc: prometheus.NewDesc("netcube_cube_packets_total",
			"Packets each cube of the tc datapath handled (lb: to or from a Service frontend; ct: of a tracked flow; nat: rewritten; router: sent on; policy: of a pod a NetworkPolicy selects), once per packet and hook; counted while monitor.cubes is on.",
			[]string{"cube"}, nil),
		byteDesc: prometheus.NewDesc("netcube_cube_bytes_total",
			"Bytes of the packets of netcube_cube_packets_total, as they arrived at the hook.",
			[]string{"cube"}, nil),
		xdpDesc: prometheus.NewDesc("netcube_xdp_packets_total",
			"Packets the XDP program on the uplinks saw (--nodeport-acceleration=xdp), by what it did: passed on to the tc datapath, forwarded itself (a Service flow from outside to a backend on another node), or dropped.",
			[]string{"action"}, nil),
	}
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.dropsDesc
	ch <- m.eventsDesc
	ch <- m.clientDesc
	ch <- m.packetDesc
	ch <- m.byteDesc
	ch <- m.xdpDesc
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
	if traffic, err := CubeTraffic(m.cubes); err == nil {
		for name, t := range traffic {
			ch <- prometheus.MustNewConstMetric(m.packetDesc, prometheus.CounterValue, float64(t.Packets), name)
			ch <- prometheus.MustNewConstMetric(m.byteDesc, prometheus.CounterValue, float64(t.Bytes), name)
		}
	}
	for k, action := range xdpActions {
		ch <- prometheus.MustNewConstMetric(m.xdpDesc, prometheus.CounterValue, float64(cube.PerCPUSum(m.xdp, uint32(k))), action)
	}
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
