package qos

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/model"
)

// metrics: each NetworkSlice and how many of this node's pods it holds
// (a slice that selects none here shows 0), and the pods paced by their
// own egress-bandwidth annotation.
type metrics struct {
	pods            *prometheus.GaugeVec
	shaped, policed prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		pods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "netcube_slice_pods",
			Help: "Pods of this node in each NetworkSlice (0: the slice selects none here), by slice and class.",
		}, []string{"slice", "class"}),
		shaped: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "netcube_pods_egress_bandwidth",
			Help: "Pods of this node paced by their own kubernetes.io/egress-bandwidth annotation.",
		}),
		policed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "netcube_pods_ingress_bandwidth",
			Help: "Pods of this node whose traffic in is shaped to their kubernetes.io/ingress-bandwidth annotation.",
		}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.pods, m.shaped, m.policed}
}

// Placement is what an assignment placed: each slice's pods on the node
// (every slice listed, empty ones too), and the pods with a rate of
// their own.
type Placement struct {
	Slices     map[string]SlicePods
	OwnRate    int // pods with an egress rate of their own
	OwnIngress int // pods with an ingress rate
}

// SlicePods is a slice's class and its pods on this node.
type SlicePods struct {
	Class model.SliceClass
	Pods  int
}

// set replaces the gauges with p.
func (m *metrics) set(p Placement) {
	m.pods.Reset()
	for name, s := range p.Slices {
		m.pods.WithLabelValues(name, s.Class.String()).Set(float64(s.Pods))
	}
	m.shaped.Set(float64(p.OwnRate))
	m.policed.Set(float64(p.OwnIngress))
}
