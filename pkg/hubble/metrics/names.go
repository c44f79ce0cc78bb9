package metrics

import (
	"fmt"
	"strings"
)

// The metrics, by the names of Cilium's handlers (its --hubble-metrics).
const (
	Flow             = "flow"
	Drop             = "drop"
	TCP              = "tcp"
	Policy           = "policy"
	PortDistribution = "port-distribution"
)

// Default is every metric netcube serves.
var Default = []string{Flow, Drop, TCP, Policy, PortDistribution}

// notServed are Cilium's metrics that netcube does not serve, and why.
var notServed = map[string]string{
	"dns":            "netcube has no DNS proxy: it sees no DNS query or response",
	"http":           "netcube has no L7 proxy: it sees no HTTP request or response",
	"httpV2":         "netcube has no L7 proxy: it sees no HTTP request or response",
	"kafka":          "netcube has no L7 proxy: it sees no Kafka request",
	"icmp":           "netcube's datapath events carry no ICMP type and code, which hubble_icmp_total is counted by",
	"sctp":           "netcube's datapath events carry no SCTP chunk type, which hubble_sctp_chunk_types_total is counted by",
	"flows-to-world": "not implemented: netcube's flows carry no reserved:world identity",
}

// Parse checks a --hubble-metrics list (names, as Cilium's: flow, drop,
// tcp, policy, port-distribution) and returns it without duplicates.
// Cilium's context options (drop:sourceContext=pod) are refused: netcube
// labels its metrics with Cilium's default labels only.
func Parse(names []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if name, opts, ok := strings.Cut(n, ":"); ok {
			return nil, fmt.Errorf("--hubble-metrics: %q: context options (%s) are not supported; name the metric alone (%s)", n, opts, name)
		}
		if why, ok := notServed[n]; ok {
			return nil, fmt.Errorf("--hubble-metrics: %q is not served: %s", n, why)
		}
		known := false
		for _, d := range Default {
			known = known || d == n
		}
		if !known {
			return nil, fmt.Errorf("--hubble-metrics: %q is not a Hubble metric (netcube serves %s)", n, strings.Join(Default, ", "))
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}
