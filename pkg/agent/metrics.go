package agent

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/lb"
	"github.com/netcube/netcube/pkg/report"
)

// metrics are the agent's Prometheus metrics.
type metrics struct {
	registry     *prometheus.Registry
	syncDuration prometheus.Histogram
	eventToMap   prometheus.Histogram
	syncErrors   prometheus.Counter
	lastSync     prometheus.Gauge
	mapOps       *prometheus.CounterVec
}

func newMetrics(cube *lb.Cube, maps *datapath.Maps, pending func() int, rep *report.Reporter) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
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
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "netcube_service_sync_errors_total", Help: "Service syncs that failed (and are retried).",
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "netcube_last_successful_sync_timestamp_seconds", Help: "When a Service sync last succeeded.",
		}),
		mapOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netcube_map_operations_total", Help: "BPF map writes by map, operation and result.",
		}, []string{"map", "op", "result"}),
	}
	fill := prometheus.NewGaugeFunc // one gauge per map: entries / size
	for _, name := range []string{datapath.MapServices, datapath.MapBackends, datapath.MapRevNAT} {
		name := name
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "netcube_map_fill_ratio", Help: "Entries in a map over its size.",
			ConstLabels: prometheus.Labels{"map": name},
		}, func() float64 { return float64(cube.Entries()[name]) / float64(maps.Size(name)) }))
	}
	m.registry.MustRegister(fill(prometheus.GaugeOpts{
		Name: "netcube_services_pending", Help: "Services waiting to be synced (including retries).",
	}, func() float64 { return float64(pending()) }))
	for _, reason := range report.Reasons {
		m.registry.MustRegister(fill(prometheus.GaugeOpts{
			Name:        "netcube_config_problems",
			Help:        "Objects netcube cannot program as written, now, by reason (each also logged, and an Event in API mode).",
			ConstLabels: prometheus.Labels{"reason": string(reason)},
		}, func() float64 { return float64(rep.Count()[reason]) }))
	}
	m.registry.MustRegister(m.syncDuration, m.eventToMap, m.syncErrors, m.lastSync, m.mapOps,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	maps.Observe = func(mapName, op string, err error) {
		result := "ok"
		var full *datapath.MapFullError
		switch {
		case errors.As(err, &full):
			result = "full"
		case err != nil:
			result = "error"
		}
		m.mapOps.WithLabelValues(mapName, op, result).Inc()
	}
	return m
}

// ServiceSynced implements reconcile.Observer.
func (m *metrics) ServiceSynced(pending, took time.Duration, err error) {
	m.syncDuration.Observe(took.Seconds())
	if err != nil {
		m.syncErrors.Inc()
		return
	}
	m.eventToMap.Observe((pending + took).Seconds())
	m.lastSync.SetToCurrentTime()
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
