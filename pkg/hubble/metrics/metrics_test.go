package metrics

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/events"
)

// series gathers m as name{label="value",...} (labels sorted by name, as
// Prometheus prints them) -> value.
func series(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			var ls []string
			for _, l := range mt.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = mt.GetCounter().GetValue()
		}
	}
	return out
}

var (
	client = netip.MustParseAddrPort("10.0.1.5:41000")
	server = netip.MustParseAddrPort("10.0.2.7:8080")
)

// The events netcube's datapath reports, one of each kind.
var (
	policyAllowedTCP = events.Event{Type: "trace", Trace: "policy-allowed", Cube: "policy", Point: "to-pod", Family: 4, Proto: "TCP",
		Src: client, Dst: server, TCPFlags: "SYN", Policy: &events.PolicyVerdict{Direction: "ingress", Rule: "peer-and-port"}}
	policyAllowedUDP6 = events.Event{Type: "trace", Trace: "policy-allowed", Cube: "policy", Point: "from-pod", Family: 6, Proto: "UDP",
		Src: netip.MustParseAddrPort("[fd00::5]:5353"), Dst: netip.MustParseAddrPort("[fd00::7]:53"), Policy: &events.PolicyVerdict{Direction: "egress", Rule: "any-peer-all-ports"}}
	policyDrop = events.Event{Type: "drop", Drop: "policy-denied-ingress", Cube: "policy", Point: "to-pod", Family: 4, Proto: "TCP",
		Src: client, Dst: server, TCPFlags: "SYN", Policy: &events.PolicyVerdict{Direction: "ingress"}}
	clusterDeny = events.Event{Type: "drop", Drop: "policy-denied-egress", Cube: "policy", Point: "from-pod", Family: 4, Proto: "TCP",
		Src: client, Dst: server, TCPFlags: "SYN", Policy: &events.PolicyVerdict{Direction: "egress", Rule: "denied"}}
	fromNode = events.Event{Type: "trace", Trace: "policy-allowed", Cube: "policy", Point: "to-pod", Family: 4, Proto: "TCP",
		Src: netip.MustParseAddrPort("10.0.2.1:50000"), Dst: server, TCPFlags: "SYN", Policy: &events.PolicyVerdict{Direction: "ingress", Rule: "from-node"}}
	noEndpoints = events.Event{Type: "drop", Drop: "no-endpoints", Cube: "lb", Point: "socket", Family: 4, Proto: "UDP",
		Src: netip.AddrPortFrom(client.Addr(), 0), Dst: netip.MustParseAddrPort("10.96.0.9:53")}
	rateDrop = events.Event{Type: "drop", Drop: "egress-rate-exceeded", Cube: "qos", Point: "to-network", Family: 6, Proto: "ICMPv6",
		Src: netip.MustParseAddrPort("[fd00::5]:0"), Dst: netip.MustParseAddrPort("[fd00::9]:0")}
	routeToNet = events.Event{Type: "trace", Trace: "route", Cube: "router", Point: "from-pod", Family: 4, Proto: "TCP",
		Src: client, Dst: netip.MustParseAddrPort("192.0.2.1:443"), TCPFlags: "SYN,ACK", Route: "fib", OutIfindex: 2}
	routeICMP = events.Event{Type: "trace", Trace: "route", Cube: "router", Point: "from-overlay", Family: 4, Proto: "ICMP",
		Src: client, Dst: server, Route: "to-pod", OutIfindex: 9}
	backend = events.Event{Type: "trace", Trace: "service-backend", Cube: "lb", Point: "from-pod", Family: 4, Proto: "TCP",
		Src: client, Dst: netip.MustParseAddrPort("10.96.0.10:80"), TCPFlags: "SYN", To: server}
	flowEnd = events.Event{Type: "trace", Trace: "flow-end", Cube: "ct", Family: 4, Proto: "TCP", Src: client, Dst: server,
		TCPFlags: "FIN,ACK", Counts: &events.FlowCounts{Packets: 9, Bytes: 900}}
	finRst = events.Event{Type: "trace", Trace: "route", Cube: "router", Point: "from-pod", Family: 6, Proto: "TCP",
		Src: netip.MustParseAddrPort("[fd00::5]:41000"), Dst: netip.MustParseAddrPort("[fd00::7]:80"), TCPFlags: "FIN,RST", Route: "to-pod"}
	otherProto = events.Event{Type: "drop", Drop: "malformed", Cube: "router", Point: "from-pod", Family: 4, Proto: "proto-47", Src: client, Dst: server}
)

// TestCounting: each event is counted in the series a Hubble dashboard
// reads, with Cilium's label values, and in no other.
func TestCounting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event events.Event
		want  []string // series counted once
	}{
		{"a connection a policy allowed", policyAllowedTCP, []string{
			`hubble_flows_processed_total{protocol="TCP",subtype="",type="PolicyVerdict",verdict="FORWARDED"}`,
			`hubble_policy_verdicts_total{action="forwarded",direction="ingress",match="l3-l4"}`,
			`hubble_tcp_flags_total{family="IPv4",flag="SYN"}`,
			`hubble_port_distribution_total{port="8080",protocol="TCP"}`,
		}},
		{"UDP over IPv6 allowed by an any-peer rule", policyAllowedUDP6, []string{
			`hubble_flows_processed_total{protocol="UDP",subtype="",type="PolicyVerdict",verdict="FORWARDED"}`,
			`hubble_policy_verdicts_total{action="forwarded",direction="egress",match="all"}`,
			`hubble_port_distribution_total{port="53",protocol="UDP"}`,
		}},
		{"a packet no policy allowed", policyDrop, []string{
			`hubble_flows_processed_total{protocol="TCP",subtype="",type="Drop",verdict="DROPPED"}`,
			`hubble_drop_total{protocol="TCP",reason="POLICY_DENIED"}`,
			`hubble_policy_verdicts_total{action="dropped",direction="ingress",match="none"}`,
		}},
		{"a ClusterNetworkPolicy's deny", clusterDeny, []string{
			`hubble_flows_processed_total{protocol="TCP",subtype="",type="Drop",verdict="DROPPED"}`,
			`hubble_drop_total{protocol="TCP",reason="POLICY_DENIED"}`,
			`hubble_policy_verdicts_total{action="dropped",direction="egress",match="unknown"}`,
		}},
		{"the node's own traffic: no verdict, as Cilium's host", fromNode, []string{
			`hubble_flows_processed_total{protocol="TCP",subtype="",type="PolicyVerdict",verdict="FORWARDED"}`,
			`hubble_tcp_flags_total{family="IPv4",flag="SYN"}`,
			`hubble_port_distribution_total{port="8080",protocol="TCP"}`,
		}},
		{"a Service without endpoints", noEndpoints, []string{
			`hubble_flows_processed_total{protocol="UDP",subtype="",type="Drop",verdict="DROPPED"}`,
			`hubble_drop_total{protocol="UDP",reason="SERVICE_BACKEND_NOT_FOUND"}`,
		}},
		{"an ICMPv6 packet over its rate", rateDrop, []string{
			`hubble_flows_processed_total{protocol="ICMPv6",subtype="",type="Drop",verdict="DROPPED"}`,
			`hubble_drop_total{protocol="ICMPv6",reason="REACHED_EDT_RATE_LIMITING_DROP_HORIZON"}`,
		}},
		{"routed to the network", routeToNet, []string{
			`hubble_flows_processed_total{protocol="TCP",subtype="to-network",type="Trace",verdict="FORWARDED"}`,
			`hubble_tcp_flags_total{family="IPv4",flag="SYN-ACK"}`,
			`hubble_port_distribution_total{port="443",protocol="TCP"}`,
		}},
		{"ICMP routed to a pod", routeICMP, []string{
			`hubble_flows_processed_total{protocol="ICMPv4",subtype="to-endpoint",type="Trace",verdict="FORWARDED"}`,
			`hubble_port_distribution_total{port="0",protocol="ICMPv4"}`,
		}},
		{"a Service's backend chosen", backend, []string{
			`hubble_flows_processed_total{protocol="TCP",subtype="from-endpoint",type="Trace",verdict="TRANSLATED"}`,
		}},
		{"a flow's end", flowEnd, []string{
			`hubble_flows_processed_total{protocol="TCP",subtype="to-endpoint",type="Trace",verdict="TRACED"}`,
		}},
		{"FIN and RST over IPv6", finRst, []string{
			`hubble_flows_processed_total{protocol="TCP",subtype="to-endpoint",type="Trace",verdict="FORWARDED"}`,
			`hubble_tcp_flags_total{family="IPv6",flag="FIN"}`,
			`hubble_tcp_flags_total{family="IPv6",flag="RST"}`,
			`hubble_port_distribution_total{port="80",protocol="TCP"}`,
		}},
		{"a protocol Hubble has no layer 4 of", otherProto, []string{
			`hubble_flows_processed_total{protocol="Unknown L4",subtype="",type="Drop",verdict="DROPPED"}`,
			`hubble_drop_total{protocol="Unknown L4",reason="INVALID_PACKET_DROPPED"}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Default)
			if err != nil {
				t.Fatal(err)
			}
			if got := series(t, m); len(got) != 0 {
				t.Fatalf("series before any event: %v", got)
			}
			e := tc.event
			m.Count(&e)
			m.Count(&e)
			got := series(t, m)
			want := map[string]float64{}
			for _, s := range tc.want {
				want[s] = 2
			}
			for s, v := range want {
				if got[s] != v {
					t.Errorf("%s = %v, want %v", s, got[s], v)
				}
			}
			for s, v := range got {
				if _, ok := want[s]; !ok {
					t.Errorf("%s = %v, want no such series", s, v)
				}
			}
		})
	}
}

// TestOnlyTheMetricsAskedFor: --hubble-metrics=drop serves the drops
// alone; none, nothing.
func TestOnlyTheMetricsAskedFor(t *testing.T) {
	m, err := New([]string{"drop"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []events.Event{policyAllowedTCP, policyDrop} {
		m.Count(&e)
	}
	got := series(t, m)
	if len(got) != 1 || got[`hubble_drop_total{protocol="TCP",reason="POLICY_DENIED"}`] != 1 {
		t.Errorf("--hubble-metrics=drop: %v, want hubble_drop_total alone", got)
	}
	none, err := New([]string{""})
	if err != nil {
		t.Fatal(err)
	}
	none.Count(&policyDrop)
	if got := series(t, none); len(got) != 0 {
		t.Errorf(`--hubble-metrics="": %v, want nothing`, got)
	}
}

// TestParse: Cilium's metrics netcube cannot serve are refused with the
// reason, as are context options and names Hubble has not.
func TestParse(t *testing.T) {
	got, err := Parse([]string{"flow", " drop", "flow", "port-distribution"})
	if err != nil || strings.Join(got, ",") != "flow,drop,port-distribution" {
		t.Errorf("Parse(flow, drop, flow, port-distribution) = %v, %v", got, err)
	}
	for in, want := range map[string]string{
		"dns:query;ignoreAAAA":   "context options (query;ignoreAAAA) are not supported",
		"dns":                    "no DNS proxy",
		"httpV2":                 "no L7 proxy",
		"icmp":                   "no ICMP type and code",
		"drop:sourceContext=pod": "context options (sourceContext=pod) are not supported",
		"flows":                  `"flows" is not a Hubble metric (netcube serves flow, drop, tcp, policy, port-distribution)`,
	} {
		if _, err := Parse([]string{"flow", in}); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--hubble-metrics") {
			t.Errorf("Parse(%q) = %v, want an error of --hubble-metrics saying %q", in, err, want)
		}
	}
}

// TestCountingAllocatesNothing: once its series exist, an event costs no
// allocation (a busy node reports tens of thousands a second).
func TestCountingAllocatesNothing(t *testing.T) {
	m, err := New(Default)
	if err != nil {
		t.Fatal(err)
	}
	all := []events.Event{policyAllowedTCP, policyAllowedUDP6, policyDrop, clusterDeny, fromNode, noEndpoints, rateDrop,
		routeToNet, routeICMP, backend, flowEnd, finRst, otherProto}
	for i := range all {
		m.Count(&all[i])
	}
	if n := testing.AllocsPerRun(100, func() {
		for i := range all {
			m.Count(&all[i])
		}
	}); n != 0 {
		t.Errorf("counting %d events allocates %v times, want 0", len(all), n)
	}
	// The positive control: the runs were counted.
	if v := series(t, m)[`hubble_drop_total{protocol="TCP",reason="POLICY_DENIED"}`]; v != 2*(1+101) {
		t.Errorf("POLICY_DENIED drops = %v, want %d", v, 2*(1+101))
	}
}

func sortedKeys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
