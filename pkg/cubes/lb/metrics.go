package lb

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/cube"
)

// metrics are the load-balancer cube's Prometheus metrics.
type metrics struct {
	syncDuration prometheus.Histogram
	eventToMap   prometheus.Histogram
	syncErrors   prometheus.Counter
	programming  prometheus.Histogram
	lastSync     prometheus.Gauge
	gauges       []prometheus.Collector
}

func newMetrics(tables *Tables, maps *cube.Maps, pending func() int) *metrics {
	m := &metrics{
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "netcube_service_sync_duration_seconds",
			Help:    "Time to apply one Service's change to the datapath.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 24), // 1µs .. 8s, factor 2
		}),
		eventToMap: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "netcube_event_to_programmed_seconds",
			Help:    "From a change's arrival at the agent to its map writes being done.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 24), // 1µs .. 8s, factor 2
		}),
		programming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "netcube_network_programming_duration_seconds",
			Help: "From an endpoint change's trigger (its EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time) " +
				"to this node's datapath programmed with it: network programming latency, as kube-proxy's " +
				"kubeproxy_network_programming_duration_seconds.",
			// 1 ms to ~20 min, factor 1.5: fine enough to read a p99 under
			// 1 s, wide enough for the SLO's 30 s and a stalled agent.
			Buckets: prometheus.ExponentialBuckets(0.001, 1.5, 35),
		}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "netcube_service_sync_errors_total", Help: "Service syncs that failed (and are retried).",
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "netcube_last_successful_sync_timestamp_seconds", Help: "When a Service sync last succeeded.",
		}),
	}
	// Fill ratios from the cube's own counts: counting a map's entries in
	// the kernel means walking it.
	for _, name := range []string{MapServices, MapBackends, MapRevNAT} {
		m.gauges = append(m.gauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "netcube_map_fill_ratio", Help: "Entries in a map over its size.",
			ConstLabels: prometheus.Labels{"map": name},
		}, func() float64 { return float64(tables.Entries()[name]) / float64(maps.Size(name)) }))
	}
	m.gauges = append(m.gauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "netcube_lb_retired_backends",
		Help: "Backends removed from every Service and kept while conntrack may have connections on them.",
	}, func() float64 { return float64(tables.Retired()) }))
	m.gauges = append(m.gauges, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "netcube_services_pending", Help: "Services waiting to be synced (including retries).",
	}, func() float64 { return float64(pending()) }))
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.syncDuration, m.eventToMap, m.programming, m.syncErrors, m.lastSync}, m.gauges...)
}

// ServiceSynced implements Observer.
func (m *metrics) ServiceSynced(pending, took time.Duration, err error) {
	m.syncDuration.Observe(took.Seconds())
	if err != nil {
		m.syncErrors.Inc()
		return
	}
	m.eventToMap.Observe((pending + took).Seconds())
	m.lastSync.SetToCurrentTime()
}

// Programmed implements Observer.
func (m *metrics) Programmed(sinceTrigger time.Duration) {
	m.programming.Observe(sinceTrigger.Seconds())
}
