package hubble

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble/flowpb"
	"github.com/netcube/netcube/pkg/model"
)

// dropReasons are Hubble's drop reasons for netcube's (events.DropReason
// names); a reason without one fails TestEveryDropReasonHasAHubbleReason.
var dropReasons = map[string]flowpb.DropReason{
	"no-endpoints":                 flowpb.DropReason_SERVICE_BACKEND_NOT_FOUND,
	"no-local-endpoint":            flowpb.DropReason_SERVICE_BACKEND_NOT_FOUND,
	"source-range":                 flowpb.DropReason_DENIED_BY_LB_SRC_RANGE_CHECK,
	"policy-denied-ingress":        flowpb.DropReason_POLICY_DENIED,
	"policy-denied-egress":         flowpb.DropReason_POLICY_DENIED,
	"ct-insert-failed":             flowpb.DropReason_CT_MAP_INSERTION_FAILED,
	"snat-ports-exhausted":         flowpb.DropReason_NO_MAPPING_FOR_NAT_MASQUERADE,
	"no-node-address":              flowpb.DropReason_NO_MAPPING_FOR_NAT_MASQUERADE,
	"nat-rewrite-failed":           flowpb.DropReason_ERROR_WRITING_TO_PACKET,
	"no-route-to-node":             flowpb.DropReason_NO_TUNNEL_OR_ENCAPSULATION_ENDPOINT,
	"malformed":                    flowpb.DropReason_INVALID_PACKET_DROPPED,
	"unsupported-extension-header": flowpb.DropReason_INVALID_IPV6_EXTENSION_HEADER,
	"fragment-without-first":       flowpb.DropReason_FIRST_LOGICAL_DATAGRAM_FRAGMENT_NOT_FOUND,
	"egress-rate-exceeded":         flowpb.DropReason_REACHED_EDT_RATE_LIMITING_DROP_HORIZON,
	"invalid-source":               flowpb.DropReason_INVALID_SOURCE_IP,
	"dsr-untrusted":                flowpb.DropReason_INVALID_PACKET_DROPPED,
}

// points are Hubble's observation points for netcube's hooks.
var points = map[string]flowpb.TraceObservationPoint{
	"from-pod":     flowpb.TraceObservationPoint_FROM_ENDPOINT,
	"to-pod":       flowpb.TraceObservationPoint_TO_ENDPOINT,
	"from-network": flowpb.TraceObservationPoint_FROM_NETWORK,
	// Hubble has no XDP point; Cilium reports its XDP drops as from the network too.
	"from-network-xdp": flowpb.TraceObservationPoint_FROM_NETWORK,
	"to-network":       flowpb.TraceObservationPoint_TO_NETWORK,
	"from-overlay":     flowpb.TraceObservationPoint_FROM_OVERLAY,
	"to-overlay":       flowpb.TraceObservationPoint_TO_OVERLAY,
}

// routePoints are where a route event's packet went, as Hubble names it.
var routePoints = map[string]flowpb.TraceObservationPoint{
	"to-pod":        flowpb.TraceObservationPoint_TO_ENDPOINT,
	"fib":           flowpb.TraceObservationPoint_TO_NETWORK,
	"fib-neighbour": flowpb.TraceObservationPoint_TO_NETWORK,
	"to-overlay":    flowpb.TraceObservationPoint_TO_OVERLAY,
	"tunnel":        flowpb.TraceObservationPoint_TO_OVERLAY,
}

// Hubble's event types (Cilium's monitor message types), which its CLI
// prints as the flow's TYPE: a drop's sub type is its drop reason; a
// trace's, its observation point (TO_ENDPOINT is 0).
const (
	eventDrop          = 1
	eventTrace         = 4
	eventPolicyVerdict = 5
)

// toFlow turns a datapath event into a Hubble flow on node.
func toFlow(e events.Event, node string, names *cube.Names) *flowpb.Flow {
	f := &flowpb.Flow{
		Time:                  timestamppb.New(e.Time),
		NodeName:              node,
		Type:                  flowpb.FlowType_L3_L4,
		TraceObservationPoint: points[e.Point],
		Source:                &flowpb.Endpoint{},
		Destination:           &flowpb.Endpoint{},
	}
	if e.Ifindex != 0 {
		f.Interface = &flowpb.NetworkInterface{Index: e.Ifindex}
	}
	f.IP = &flowpb.IP{IpVersion: flowpb.IPVersion_IPv4}
	if e.Family == 6 {
		f.IP.IpVersion = flowpb.IPVersion_IPv6
	}
	if e.Src.IsValid() {
		f.IP.Source = e.Src.Addr().String()
	}
	if e.Dst.IsValid() {
		f.IP.Destination = e.Dst.Addr().String()
	}
	f.L4 = layer4(e)
	name(f.Source, e.Src, names)
	name(f.Destination, e.Dst, names)

	switch {
	case e.Type == "drop":
		f.Verdict = flowpb.Verdict_DROPPED
		f.DropReasonDesc = dropReasons[e.Drop]
		f.EventType = &flowpb.CiliumEventType{Type: eventDrop, SubType: int32(f.DropReasonDesc)}
		f.Summary = e.Cube + ": " + e.Drop
		if e.Policy == nil {
			f.TrafficDirection = directionOf(e.Point)
		}
	case e.Trace == "policy-allowed":
		f.Verdict = flowpb.Verdict_FORWARDED
		f.EventType = &flowpb.CiliumEventType{Type: eventPolicyVerdict}
		f.IsReply = wrapperspb.Bool(false)
		f.Summary = "policy: allowed"
	case e.Trace == "route":
		// Where the router sent a flow's first packet: Cilium's trace
		// event, its observation point where the packet went.
		f.Verdict = flowpb.Verdict_FORWARDED
		f.TraceObservationPoint = routePoints[e.Route]
		sub := int32(f.TraceObservationPoint)
		if f.TraceObservationPoint == flowpb.TraceObservationPoint_TO_ENDPOINT {
			sub = 0
		}
		f.EventType = &flowpb.CiliumEventType{Type: eventTrace, SubType: sub}
		f.IsReply = wrapperspb.Bool(false)
		f.TrafficDirection = directionOf(e.Point)
		if e.OutIfindex != 0 {
			f.Interface = &flowpb.NetworkInterface{Index: e.OutIfindex}
		}
		f.Summary = fmt.Sprintf("router: %s", e.Route)
		if e.To.IsValid() {
			f.Summary += " " + e.To.Addr().String()
		}
	case e.Counts != nil:
		// A flow's end: traced, with what it carried (Hubble's flow has no
		// counters: they are in the summary).
		f.Verdict = flowpb.Verdict_TRACED
		f.EventType = &flowpb.CiliumEventType{Type: eventTrace}
		c := e.Counts
		f.Summary = fmt.Sprintf("%s: %s, %d packets %d bytes, replies %d packets %d bytes", e.Cube, e.Trace,
			c.Packets, c.Bytes, c.ReplyPackets, c.ReplyBytes)
	default:
		f.Verdict = flowpb.Verdict_TRANSLATED
		sub := int32(f.TraceObservationPoint)
		if f.TraceObservationPoint == flowpb.TraceObservationPoint_TO_ENDPOINT {
			sub = 0
		}
		f.EventType = &flowpb.CiliumEventType{Type: eventTrace, SubType: sub}
		f.IsReply = wrapperspb.Bool(false)
		f.TrafficDirection = directionOf(e.Point)
		f.Summary = fmt.Sprintf("%s: %s -> %s", e.Cube, e.Trace, e.To)
		if (e.Trace == "snat" || e.Trace == "masquerade") && e.To.IsValid() {
			f.IP.SourceXlated = e.To.Addr().String()
		}
	}
	if p := e.Policy; p != nil {
		local, peer := f.Destination, f.Source
		f.TrafficDirection = flowpb.TrafficDirection_INGRESS
		if p.Direction == "egress" {
			local, peer = f.Source, f.Destination
			f.TrafficDirection = flowpb.TrafficDirection_EGRESS
		}
		local.ID = p.Endpoint
		peer.Identity = p.Peer
		if p.Rule != "" {
			f.Summary += " by rule " + p.Rule
		}
		// Hubble's policy names (hubble observe --print-policy-names):
		// the policies allowing it, or, dropped, the ClusterNetworkPolicy
		// whose rule denied it, or the NetworkPolicies isolating the pod
		// (NetworkPolicy has no deny rule: none of theirs allowed it).
		by := policies(p.Policies)
		switch {
		case e.Type == "drop" && f.TrafficDirection == flowpb.TrafficDirection_EGRESS:
			f.EgressDeniedBy = by
		case e.Type == "drop":
			f.IngressDeniedBy = by
		case f.TrafficDirection == flowpb.TrafficDirection_EGRESS:
			f.EgressAllowedBy = by
		default:
			f.IngressAllowedBy = by
		}
	}
	if e.Type == "drop" && (e.TCPFlags == "SYN" || e.Point == "socket") {
		f.IsReply = wrapperspb.Bool(false) // a connection's first packet, or its connect()
	}
	if ns, name, ok := strings.Cut(e.Service, "/"); ok { // named by the monitor cube
		f.DestinationService = &flowpb.Service{Namespace: ns, Name: name}
	} else if e.ServiceID != 0 {
		if id, ok := names.ServiceByRevNAT(e.ServiceID); ok {
			f.DestinationService = &flowpb.Service{Namespace: id.Namespace, Name: id.Name}
		}
	}
	if f.DestinationService == nil && e.Dst.IsValid() {
		if id, ok := names.ServiceAt(model.Frontend{Addr: e.Dst.Addr(), Port: e.Dst.Port(), Proto: e.L4()}); ok {
			f.DestinationService = &flowpb.Service{Namespace: id.Namespace, Name: id.Name}
		}
	}
	return f
}

func directionOf(point string) flowpb.TrafficDirection {
	switch point {
	case "from-pod", "socket":
		return flowpb.TrafficDirection_EGRESS
	case "to-pod":
		return flowpb.TrafficDirection_INGRESS
	}
	return flowpb.TrafficDirection_TRAFFIC_DIRECTION_UNKNOWN
}

func layer4(e events.Event) *flowpb.Layer4 {
	sp, dp := uint32(e.Src.Port()), uint32(e.Dst.Port())
	switch e.Proto {
	case "TCP":
		t := &flowpb.TCP{SourcePort: sp, DestinationPort: dp, Flags: &flowpb.TCPFlags{}}
		for _, fl := range strings.Split(e.TCPFlags, ",") {
			switch fl {
			case "SYN":
				t.Flags.SYN = true
			case "ACK":
				t.Flags.ACK = true
			case "FIN":
				t.Flags.FIN = true
			case "RST":
				t.Flags.RST = true
			case "PSH":
				t.Flags.PSH = true
			}
		}
		return &flowpb.Layer4{Protocol: &flowpb.Layer4_TCP{TCP: t}}
	case "UDP":
		return &flowpb.Layer4{Protocol: &flowpb.Layer4_UDP{UDP: &flowpb.UDP{SourcePort: sp, DestinationPort: dp}}}
	case "SCTP":
		return &flowpb.Layer4{Protocol: &flowpb.Layer4_SCTP{SCTP: &flowpb.SCTP{SourcePort: sp, DestinationPort: dp}}}
	case "ICMP":
		return &flowpb.Layer4{Protocol: &flowpb.Layer4_ICMPv4{ICMPv4: &flowpb.ICMPv4{}}}
	case "ICMPv6":
		return &flowpb.Layer4{Protocol: &flowpb.Layer4_ICMPv6{ICMPv6: &flowpb.ICMPv6{}}}
	}
	return nil
}

// name fills an endpoint with the pod at ap's address, in Hubble's
// label form (k8s:key=value, sorted).
func name(ep *flowpb.Endpoint, ap netip.AddrPort, names *cube.Names) {
	if !ap.IsValid() || names == nil {
		return
	}
	id, labels, ok := names.PodAt(ap.Addr())
	if !ok {
		return
	}
	ep.Namespace, ep.PodName = id.Namespace, id.Name
	for k, v := range labels {
		ep.Labels = append(ep.Labels, "k8s:"+k+"="+v)
	}
	ep.Labels = append(ep.Labels, "k8s:io.kubernetes.pod.namespace="+id.Namespace)
	sort.Strings(ep.Labels)
}

// policies are NetworkPolicies (namespace/name) and ClusterNetworkPolicies
// (model.ClusterPolicyRef) as Hubble names them: the kind, and a cluster
// policy's tier as a label.
func policies(ids []string) []*flowpb.Policy {
	var out []*flowpb.Policy
	for _, id := range ids {
		if rest, ok := strings.CutPrefix(id, "ClusterNetworkPolicy:"); ok {
			tier, name, _ := strings.Cut(rest, ":")
			out = append(out, &flowpb.Policy{Name: name, Kind: "ClusterNetworkPolicy", Labels: []string{"k8s:policy.networking.k8s.io/tier=" + tier}})
			continue
		}
		ns, name, _ := strings.Cut(id, "/")
		out = append(out, &flowpb.Policy{Namespace: ns, Name: name, Kind: "NetworkPolicy"})
	}
	return out
}
