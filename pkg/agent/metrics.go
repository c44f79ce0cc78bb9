package agent

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/report"
)

// metrics are the agent's own Prometheus metrics; each cube registers
// its own beside them.
type metrics struct {
	registry *prometheus.Registry
	mapOps   *prometheus.CounterVec
}

func newMetrics(rep *report.Reporter) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		mapOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netcube_map_operations_total", Help: "BPF map writes by map, operation and result.",
		}, []string{"map", "op", "result"}),
	}
	for _, reason := range report.Reasons {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "netcube_config_problems",
			Help:        "Objects netcube cannot program as written, now, by reason (each also logged, and an Event in API mode).",
			ConstLabels: prometheus.Labels{"reason": string(reason)},
		}, func() float64 { return float64(rep.Count()[reason]) }))
	}
	m.registry.MustRegister(m.mapOps,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// observeMap counts n of a cube's map writes (cube.Maps.Observe).
func (m *metrics) observeMap(mapName, op string, n int, err error) {
	result := "ok"
	var full *cube.MapFullError
	switch {
	case errors.As(err, &full):
		result = "full"
	case err != nil:
		result = "error"
	}
	m.mapOps.WithLabelValues(mapName, op, result).Add(float64(n))
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// lastSync is when the Service datapath last applied a sync
// (netcube_last_successful_sync_timestamp_seconds); zero before the first.
func (m *metrics) lastSync() time.Time {
	families, err := m.registry.Gather()
	if err != nil {
		return time.Time{}
	}
	for _, f := range families {
		if f.GetName() == "netcube_last_successful_sync_timestamp_seconds" && len(f.GetMetric()) > 0 {
			if v := f.GetMetric()[0].GetGauge().GetValue(); v > 0 {
				return time.Unix(0, int64(v*1e9))
			}
		}
	}
	return time.Time{}
}
