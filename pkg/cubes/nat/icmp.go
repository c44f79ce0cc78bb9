package nat

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// MapICMPStats counts, per CPU, what became of the ICMP messages the
// datapath read (bpf/entry/xlate_icmp.h).
const MapICMPStats = "nat_icmp_stats"

// icmpResults names each counter of nat_icmp_stats as the metric's label.
var icmpResults = map[datapath.NatIcmpStat]string{
	datapath.NatIcmpEchoMasq:     "echo_masqueraded",
	datapath.NatIcmpEchoNoID:     "echo_dropped_no_identifier",
	datapath.NatIcmpErrXlated:    "error_translated",
	datapath.NatIcmpErrShort:     "error_passed_quote_too_short",
	datapath.NatIcmpErrUntracked: "error_passed_no_flow",
	datapath.NatIcmpErrBad:       "error_dropped_rewrite_failed",
}

// icmpMetrics is netcube_nat_icmp_total{result}, read from the map when
// scraped.
type icmpMetrics struct {
	stats cube.Map
	desc  *prometheus.Desc
}

func newICMPMetrics(stats cube.Map) *icmpMetrics {
	return &icmpMetrics{stats: stats, desc: prometheus.NewDesc("netcube_nat_icmp_total",
		"ICMP messages of pods' flows: echo requests masqueraded or dropped, errors translated back to a pod, passed untranslated (and why) or dropped.",
		[]string{"result"}, nil)}
}

func (m *icmpMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.desc }

func (m *icmpMetrics) Collect(ch chan<- prometheus.Metric) {
	for s, result := range icmpResults {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(cube.PerCPUSum(m.stats, uint32(s))), result)
	}
}
