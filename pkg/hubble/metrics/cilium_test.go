package metrics

import (
	"fmt"
	"testing"

	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble"
	"github.com/netcube/netcube/pkg/hubble/flowpb"
)

// ciliumSeries is what Cilium's flow, drop, tcp and port-distribution
// handlers (pkg/hubble/metrics/*/handler.go at v1.20, restated here) count
// of flow f: the series each increments.
func ciliumSeries(f *flowpb.Flow) []string {
	var out []string
	proto := "Unknown L4"
	l4 := f.GetL4()
	switch {
	case l4.GetTCP() != nil:
		proto = "TCP"
	case l4.GetUDP() != nil:
		proto = "UDP"
	case l4.GetICMPv4() != nil:
		proto = "ICMPv4"
	case l4.GetICMPv6() != nil:
		proto = "ICMPv6"
	case l4.GetSCTP() != nil:
		proto = "SCTP"
	}
	typ, sub := "Unknown", ""
	switch f.GetEventType().GetType() {
	case 1:
		typ = "Drop"
	case 4:
		typ = "Trace"
		sub = map[int32]string{0: "to-endpoint", 1: "to-proxy", 2: "to-host", 3: "to-stack", 4: "to-overlay", 5: "from-endpoint",
			6: "from-proxy", 7: "from-host", 8: "from-stack", 9: "from-overlay", 10: "from-network", 11: "to-network"}[f.GetEventType().GetSubType()]
	case 5:
		typ = "PolicyVerdict"
	}
	out = append(out, fmt.Sprintf(`hubble_flows_processed_total{protocol=%q,subtype=%q,type=%q,verdict=%q}`, proto, sub, typ, f.GetVerdict()))
	if f.GetVerdict() == flowpb.Verdict_DROPPED {
		out = append(out, fmt.Sprintf(`hubble_drop_total{protocol=%q,reason=%q}`, proto, f.GetDropReasonDesc()))
	}
	forwarded := f.GetVerdict() == flowpb.Verdict_FORWARDED || f.GetVerdict() == flowpb.Verdict_REDIRECTED
	if tcp := l4.GetTCP(); forwarded && tcp != nil && tcp.GetFlags() != nil && f.GetIP() != nil {
		fam := f.GetIP().GetIpVersion().String()
		fl := tcp.GetFlags()
		if fl.GetFIN() {
			out = append(out, fmt.Sprintf(`hubble_tcp_flags_total{family=%q,flag="FIN"}`, fam))
		}
		if fl.GetSYN() && fl.GetACK() {
			out = append(out, fmt.Sprintf(`hubble_tcp_flags_total{family=%q,flag="SYN-ACK"}`, fam))
		} else if fl.GetSYN() {
			out = append(out, fmt.Sprintf(`hubble_tcp_flags_total{family=%q,flag="SYN"}`, fam))
		}
		if fl.GetRST() {
			out = append(out, fmt.Sprintf(`hubble_tcp_flags_total{family=%q,flag="RST"}`, fam))
		}
	}
	if forwarded && l4 != nil && f.GetIsReply() != nil && !f.GetIsReply().GetValue() {
		port := uint32(0)
		switch {
		case l4.GetTCP() != nil:
			port = l4.GetTCP().GetDestinationPort()
		case l4.GetUDP() != nil:
			port = l4.GetUDP().GetDestinationPort()
		case l4.GetSCTP() != nil:
			port = l4.GetSCTP().GetDestinationPort()
		}
		out = append(out, fmt.Sprintf(`hubble_port_distribution_total{port="%d",protocol=%q}`, port, proto))
	}
	return out
}

// TestCountedAsCiliumCountsTheServersFlow: for every kind of event, the
// flow, drop, tcp and port-distribution series are those Cilium's
// handlers count of the very flow the Hubble server sends for it
// (hubble.Flow): what hubble observe shows and what the dashboard counts
// agree. (Policy verdicts differ by design: see countPolicy.)
func TestCountedAsCiliumCountsTheServersFlow(t *testing.T) {
	all := []events.Event{policyAllowedTCP, policyAllowedUDP6, policyDrop, clusterDeny, fromNode, noEndpoints, rateDrop,
		routeToNet, routeICMP, backend, flowEnd, finRst, otherProto}
	// Every drop reason, and a socket hook's translation.
	for _, d := range []string{"no-local-endpoint", "source-range", "ct-insert-failed", "snat-ports-exhausted", "no-node-address",
		"nat-rewrite-failed", "no-route-to-node", "unsupported-extension-header", "invalid-source", "dsr-untrusted", "fragment-without-first"} {
		all = append(all, events.Event{Type: "drop", Drop: d, Point: "from-network", Family: 4, Proto: "UDP", Src: client, Dst: server})
	}
	all = append(all, events.Event{Type: "trace", Trace: "socket-backend", Cube: "lb", Point: "socket", Family: 4, Proto: "TCP", Dst: server, To: client})
	for _, e := range all {
		m, err := New([]string{Flow, Drop, TCP, PortDistribution})
		if err != nil {
			t.Fatal(err)
		}
		m.Count(&e)
		got := series(t, m)
		want := ciliumSeries(hubble.Flow(e, "node-1", nil))
		for _, s := range want {
			if got[s] != 1 {
				t.Errorf("%s: %s = %v, want 1 (Cilium's count of the server's flow)", e, s, got[s])
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: counted %v, Cilium's handlers count %v", e, sortedKeys(got), want)
		}
	}
}
