// Package metrics serves Hubble's flow metrics from netcube's datapath
// events, with the names, labels and label values of Cilium's Hubble
// metrics (its pkg/hubble/metrics handlers at v1.20), so that a Hubble
// Grafana dashboard reads them as it reads Cilium's:
// hubble_flows_processed_total, hubble_drop_total, hubble_tcp_flags_total,
// hubble_policy_verdicts_total and hubble_port_distribution_total. Each
// event is counted as the flow the Hubble server (package hubble) makes of
// it, without making that flow: on a goroutine of its own that reads the
// event hub, each label set's counter made once and kept in arrays indexed
// by small numbers, so that counting an event allocates nothing.
//
// Cilium's DNS, HTTP and Kafka metrics need an L7 proxy, which netcube has
// not; its ICMP and SCTP metrics need the ICMP type and SCTP chunk type,
// which netcube's events do not carry. Asking for one (--hubble-metrics)
// is an error saying so, not a metric that is never counted.
package metrics
