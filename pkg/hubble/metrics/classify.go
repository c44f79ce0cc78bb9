package metrics

import (
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble"
	"github.com/netcube/netcube/pkg/hubble/flowpb"
)

// kind is which of the Hubble server's flows an event becomes (the cases
// of its toFlow): its event type and verdict.
type kind uint8

const (
	kindDrop          kind = iota // Drop, DROPPED
	kindPolicyVerdict             // PolicyVerdict, FORWARDED: a connection a policy allowed
	// The trace kinds, whose subtype is an observation point.
	kindRoute      // Trace, FORWARDED: where the router sent a flow's first packet
	kindFlowEnd    // Trace, TRACED: a flow's end, with its counters
	kindTranslated // Trace, TRANSLATED: a flow a cube translated
	nKinds
)

var kinds = [nKinds]struct {
	typeName string // Cilium's flow handler's type label
	verdict  flowpb.Verdict
}{
	kindDrop:          {"Drop", flowpb.Verdict_DROPPED},
	kindPolicyVerdict: {"PolicyVerdict", flowpb.Verdict_FORWARDED},
	kindRoute:         {"Trace", flowpb.Verdict_FORWARDED},
	kindFlowEnd:       {"Trace", flowpb.Verdict_TRACED},
	kindTranslated:    {"Trace", flowpb.Verdict_TRANSLATED},
}

func kindOf(e *events.Event) kind {
	switch {
	case e.Type == "drop":
		return kindDrop
	case e.Trace == "policy-allowed":
		return kindPolicyVerdict
	case e.Trace == "route":
		return kindRoute
	case e.Counts != nil:
		return kindFlowEnd
	}
	return kindTranslated
}

// protocol is a flow's protocol as Cilium's metrics name it
// (hubble/api/v1.FlowProtocol of an L3/L4 flow).
type protocol uint8

const (
	protoTCP protocol = iota
	protoUDP
	protoICMPv4
	protoICMPv6
	protoSCTP
	protoUnknown
	nProtocols
)

var protocolNames = [nProtocols]string{"TCP", "UDP", "ICMPv4", "ICMPv6", "SCTP", "Unknown L4"}

// protocolOf reads events.Event.Proto.
func protocolOf(proto string) protocol {
	switch proto {
	case "TCP":
		return protoTCP
	case "UDP":
		return protoUDP
	case "ICMP":
		return protoICMPv4
	case "ICMPv6":
		return protoICMPv6
	case "SCTP":
		return protoSCTP
	}
	return protoUnknown
}

// traceSubtypes are Cilium's names of a trace event's sub type, its
// observation point in the datapath's numbering (monitor/api's
// TraceObservationPoints; to-endpoint is 0), which is the flow's
// TraceObservationPoint but for TO_ENDPOINT (101).
var traceSubtypes = [nSubtypes]string{
	"to-endpoint", "to-proxy", "to-host", "to-stack", "to-overlay",
	"from-endpoint", "from-proxy", "from-host", "from-stack", "from-overlay",
	"from-network", "to-network", "from-crypto", "to-crypto",
}

const nSubtypes = 14

// subtypeOf is a trace event's sub type, as the Hubble server sets it.
func subtypeOf(e *events.Event, k kind) int {
	var p flowpb.TraceObservationPoint
	switch k {
	case kindRoute:
		p = hubble.RoutePoint(e.Route)
	case kindFlowEnd:
		return 0 // the server sets none
	default:
		p = hubble.ObservationPoint(e.Point)
	}
	if p == flowpb.TraceObservationPoint_TO_ENDPOINT || p < 0 || int(p) >= nSubtypes {
		return 0
	}
	return int(p)
}
