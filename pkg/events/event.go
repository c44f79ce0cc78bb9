package events

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
	"unsafe"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Event is one event of the datapath, decoded.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"` // "drop" or "trace"
	Cube    string    `json:"cube"` // the cube that decided
	Point   string    `json:"point,omitempty"`
	Ifindex uint32    `json:"ifindex,omitempty"`
	Len     uint32    `json:"len,omitempty"`
	Family  uint8     `json:"family"`
	Proto   string    `json:"proto"`
	// Src at a socket hook is the pod's address, named by the socket's
	// network namespace (NetnsCookie), port 0: the socket has none yet;
	// zero when the namespace is not a known pod's.
	Src      netip.AddrPort `json:"src,omitzero"`
	Dst      netip.AddrPort `json:"dst,omitzero"`
	TCPFlags string         `json:"tcp_flags,omitempty"`
	// Drop is the drop reason's name (Type "drop").
	Drop string `json:"drop_reason,omitempty"`
	// Trace is what the cube did (Type "trace").
	Trace string `json:"trace,omitempty"`
	// To is where a translation sent the flow: the backend, or the new
	// source (SNAT, masquerade).
	To netip.AddrPort `json:"translated_to,omitzero"`
	// ServiceID is the Service's revNAT id (lb events).
	ServiceID uint32         `json:"service_id,omitempty"`
	Policy    *PolicyVerdict `json:"policy,omitempty"`
	// Route is how the router sent a flow's first packet on (trace
	// "route": to-pod, fib, fib-neighbour, to-overlay, tunnel: To is the
	// remote node), to device OutIfindex.
	Route      string `json:"route,omitempty"`
	OutIfindex uint32 `json:"out_ifindex,omitempty"`
	// Counts are a flow's packets and bytes (flow-end, flow-timeout).
	Counts *FlowCounts `json:"counts,omitempty"`
	// NetnsCookie is the network namespace of the socket (socket events).
	NetnsCookie uint64 `json:"netns_cookie,omitempty"`
	// SrcPod, DstPod (namespace/name) and Service (namespace/name, the
	// Service addressed or picked) are named by the agent when it knows
	// them.
	SrcPod  string `json:"src_pod,omitempty"`
	DstPod  string `json:"dst_pod,omitempty"`
	Service string `json:"service,omitempty"`
}

// PolicyVerdict is what a NetworkPolicy decided, for which pod.
type PolicyVerdict struct {
	Direction string `json:"direction"` // of the pod: ingress or egress
	Endpoint  uint32 `json:"endpoint"`  // the pod's policy endpoint id
	Peer      uint32 `json:"peer_identity"`
	// Rule is the kind of rule that allowed it ("" for a drop none
	// allowed; "denied" for a ClusterNetworkPolicy's Deny).
	Rule string `json:"rule,omitempty"`
	// Policies (namespace/name), named by the agent: allowed, the
	// NetworkPolicies with a rule allowing it; dropped, those isolating
	// the pod in this direction, none of whose rules allowed it. A
	// ClusterNetworkPolicy's verdict names it alone, with its tier
	// (model.ClusterPolicyRef: ClusterNetworkPolicy:Admin:name).
	Policies []string `json:"policies,omitempty"`
}

// FlowCounts are what a flow carried while the agent traced: as sent (by
// Src) and its replies (a timed-out way: its own only).
type FlowCounts struct {
	Packets      uint64 `json:"packets"`
	Bytes        uint64 `json:"bytes"`
	ReplyPackets uint64 `json:"reply_packets"`
	ReplyBytes   uint64 `json:"reply_bytes"`
}

// L4 is the event's protocol as Services and policies name it (0: neither
// TCP, UDP nor SCTP).
func (e Event) L4() model.Proto {
	switch e.Proto {
	case "TCP":
		return model.TCP
	case "UDP":
		return model.UDP
	case "SCTP":
		return model.SCTP
	}
	return 0
}

// eventSize is the size of struct mon_event.
var eventSize = int(unsafe.Sizeof(datapath.MonEvent{}))

// Decode turns a ring buffer record into an Event; boot is the wall
// clock time of the monotonic clock's zero (the events' time base).
func Decode(raw []byte, boot time.Time) (Event, error) {
	if len(raw) < eventSize {
		return Event{}, fmt.Errorf("monitor event of %d bytes, want %d", len(raw), eventSize)
	}
	// The record is the C struct (the generated type's host layout), in
	// this host's byte order: copied out as it is, without reflection
	// (a busy node writes tens of thousands a second).
	var e datapath.MonEvent
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&e)), eventSize), raw)
	ev := fromRaw(&e, boot)
	if t := datapath.MonTrace(e.Trace); e.Type == uint8(datapath.MonEvTrace) && (t == datapath.MonTraceFlowEnd || t == datapath.MonTraceFlowTimeout) {
		if len(raw) < flowEndSize {
			return Event{}, fmt.Errorf("flow end of %d bytes, want %d", len(raw), flowEndSize)
		}
		var fe datapath.MonFlowEnd
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&fe)), flowEndSize), raw)
		ev.Counts = &FlowCounts{Packets: fe.Packets[0], Bytes: fe.Bytes[0], ReplyPackets: fe.Packets[1], ReplyBytes: fe.Bytes[1]}
	}
	return ev, nil
}

// flowEndSize is the size of struct mon_flow_end: an event and counters.
var flowEndSize = int(unsafe.Sizeof(datapath.MonFlowEnd{}))

func fromRaw(e *datapath.MonEvent, boot time.Time) Event {
	ev := Event{
		Time:    boot.Add(time.Duration(e.TsNs)),
		Point:   nameOr(points, datapath.MonPoint(e.Point)),
		Ifindex: e.Ifindex,
		Len:     e.Len,
		Family:  e.Family,
		Proto:   protoName(e.Proto),
	}
	if e.Family != 0 {
		src := datapath.Addr{W: e.Saddr.W}.IP()
		if src.IsValid() && !src.IsUnspecified() {
			ev.Src = netip.AddrPortFrom(src, datapath.HostPort(e.Sport))
		}
		ev.Dst = netip.AddrPortFrom(datapath.Addr{W: e.Daddr.W}.IP(), datapath.HostPort(e.Dport))
	}
	if e.Proto == 6 {
		ev.TCPFlags = tcpFlags(e.TcpFlags)
	}
	switch datapath.MonType(e.Type) {
	case datapath.MonEvDrop:
		r := DropReason(datapath.MonDrop(e.Drop))
		ev.Type, ev.Drop, ev.Cube = "drop", r.Name, r.Cube
	default:
		t := traces[datapath.MonTrace(e.Trace)]
		ev.Type, ev.Trace, ev.Cube = "trace", t.name, t.cube
	}
	if x := (datapath.Addr{W: e.Xaddr.W}).IP(); e.Xport != 0 || (x.IsValid() && !x.IsUnspecified()) {
		ev.To = netip.AddrPortFrom(x, datapath.HostPort(e.Xport))
	}
	ev.ServiceID = e.Svc
	ev.NetnsCookie = e.Netns
	if e.Route != 0 {
		ev.Route = nameOr(routes, datapath.MonRoute(e.Route))
		ev.OutIfindex = e.OutIfindex
	}
	if e.PolDir != 0 {
		dir := "ingress"
		if datapath.PolicyDir(e.PolDir) == datapath.PolicyEgress {
			dir = "egress"
		}
		ev.Policy = &PolicyVerdict{Direction: dir, Endpoint: e.Endpoint, Peer: e.Peer,
			Rule: nameOr(matches, datapath.MonPolMatch(e.Match))}
	}
	return ev
}

func protoName(p uint8) string {
	switch p {
	case 1:
		return "ICMP"
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 58:
		return "ICMPv6"
	case 132:
		return "SCTP"
	}
	return "proto-" + itoa(uint32(p))
}

func tcpFlags(f uint8) string {
	var s []string
	for _, b := range []struct {
		bit  uint8
		name string
	}{{0x02, "SYN"}, {0x10, "ACK"}, {0x01, "FIN"}, {0x04, "RST"}, {0x08, "PSH"}} {
		if f&b.bit != 0 {
			s = append(s, b.name)
		}
	}
	return strings.Join(s, ",")
}

// String is the event as netcube monitor prints it: one line.
func (e Event) String() string {
	var b strings.Builder
	b.WriteString(e.Time.Format("15:04:05.000000"))
	if e.Type == "drop" {
		fmt.Fprintf(&b, " DROPPED (%s) by %s", e.Drop, e.Cube)
	} else {
		fmt.Fprintf(&b, " %s by %s", e.Trace, e.Cube)
	}
	if e.Point != "" {
		fmt.Fprintf(&b, " at %s", e.Point)
	}
	if e.Ifindex != 0 {
		fmt.Fprintf(&b, " if %d", e.Ifindex)
	}
	src := "pod socket"
	if e.Src.IsValid() && e.Point == "socket" {
		src = e.Src.Addr().String() + " (socket)"
	} else if e.Src.IsValid() {
		src = e.Src.String()
	}
	if e.SrcPod != "" {
		src += " (" + e.SrcPod + ")"
	}
	dst := e.Dst.String()
	if e.DstPod != "" {
		dst += " (" + e.DstPod + ")"
	} else if e.Service != "" {
		dst += " (service " + e.Service + ")"
	}
	fmt.Fprintf(&b, ": %s %s -> %s", e.Proto, src, dst)
	if e.TCPFlags != "" {
		fmt.Fprintf(&b, " [%s]", e.TCPFlags)
	}
	if e.To.IsValid() {
		fmt.Fprintf(&b, " => %s", e.To)
	}
	if e.Route != "" {
		fmt.Fprintf(&b, " routed %s if %d", e.Route, e.OutIfindex)
	}
	if c := e.Counts; c != nil {
		fmt.Fprintf(&b, " %d packets %d bytes, replies %d packets %d bytes", c.Packets, c.Bytes, c.ReplyPackets, c.ReplyBytes)
	}
	if e.Service != "" && e.DstPod != "" {
		fmt.Fprintf(&b, " service %s", e.Service)
	} else if e.Service == "" && e.ServiceID != 0 {
		fmt.Fprintf(&b, " service %d", e.ServiceID)
	}
	if p := e.Policy; p != nil {
		fmt.Fprintf(&b, " policy %s of endpoint %d, peer identity %d", p.Direction, p.Endpoint, p.Peer)
		if p.Rule != "" {
			fmt.Fprintf(&b, ", rule %s", p.Rule)
		}
		if len(p.Policies) > 0 {
			by := "allowed by"
			switch {
			case e.Type == "drop" && p.Rule == nameOr(matches, datapath.MonPolDeny):
				by = "denied by" // a ClusterNetworkPolicy's Deny
			case e.Type == "drop":
				by = "isolated by"
			}
			fmt.Fprintf(&b, ", %s %s", by, strings.Join(p.Policies, ", "))
		}
	}
	return b.String()
}
