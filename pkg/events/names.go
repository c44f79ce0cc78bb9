package events

import "github.com/netcube/netcube/pkg/datapath"

// Reason describes a drop reason of the datapath (enum mon_drop).
type Reason struct {
	Name string // the metric label and the name netcube monitor prints
	Cube string // the cube that decided
	Help string
}

// drops names every reason of enum mon_drop; a reason the C adds without
// a name here fails TestEveryDropReasonIsNamed.
var drops = map[datapath.MonDrop]Reason{
	datapath.MonDropNoEndpoints:     {"no-endpoints", "lb", "a Service without a ready endpoint: refused (TCP RST, ICMP unreachable, or ECONNREFUSED at connect)"},
	datapath.MonDropNoLocalEndpoint: {"no-local-endpoint", "lb", "traffic policy Local and no endpoint on this node"},
	datapath.MonDropSourceRange:     {"source-range", "lb", "the client is outside the Service's loadBalancerSourceRanges"},
	datapath.MonDropPolicyIngress:   {"policy-denied-ingress", "policy", "no NetworkPolicy rule of the receiving pod allows it"},
	datapath.MonDropPolicyEgress:    {"policy-denied-egress", "policy", "no NetworkPolicy rule of the sending pod allows it"},
	datapath.MonDropCTCreate:        {"ct-insert-failed", "ct", "the flow's conntrack entries could not be written"},
	datapath.MonDropSNATNoPort:      {"snat-ports-exhausted", "nat", "no source port (ICMP identifier) free to SNAT or masquerade the flow"},
	datapath.MonDropNoNodeAddr:      {"no-node-address", "nat", "no address of the packet's family on this node to SNAT to"},
	datapath.MonDropNATRewrite:      {"nat-rewrite-failed", "nat", "the packet (or the quote of an ICMP error about a translated flow) could not be rewritten: cut short, or the kernel could not make it writable"},
	datapath.MonDropNoTunnel:        {"no-route-to-node", "router", "VXLAN: no node's pod CIDR holds the destination"},
	datapath.MonDropMalformed:       {"malformed", "router", "a header too short to rewrite or route"},
	datapath.MonDropExtHeader:       {"unsupported-extension-header", "lb", "an IPv6 extension header (not a fragment header) on a packet to a ClusterIP: its ports, and so its backend, cannot be read"},
	datapath.MonDropRate:            {"egress-rate-exceeded", "qos", "a pod's packet would have waited beyond its rate's horizon (its slice's rate, or its kubernetes.io/egress-bandwidth)"},
	datapath.MonDropInvalidSource:   {"invalid-source", "router", "a pod sent a packet whose source address is not one of its own (a forged source)"},
	datapath.MonDropDSRUntrusted:    {"dsr-untrusted", "lb", "a packet carried a DSR option but DSR is off, or its sender is not a node of the cluster"},
	datapath.MonDropFragUnseen:      {"fragment-without-first", "lb", "a later fragment to a ClusterIP whose first fragment (with the ports) was not seen on this node"},
}

// DropReason describes reason d (Name "unknown-N" if the datapath is newer
// than this binary).
func DropReason(d datapath.MonDrop) Reason {
	if r, ok := drops[d]; ok {
		return r
	}
	return Reason{Name: "unknown-" + itoa(uint32(d)), Cube: "?"}
}

// DropReasons lists every reason, in the datapath's order.
func DropReasons() []datapath.MonDrop {
	var all []datapath.MonDrop
	for d := datapath.MonDropNone + 1; d < datapath.MonDropMax; d++ {
		all = append(all, d)
	}
	return all
}

var points = map[datapath.MonPoint]string{
	datapath.MonAtFromPod:     "from-pod",
	datapath.MonAtToPod:       "to-pod",
	datapath.MonAtFromNet:     "from-network",
	datapath.MonAtToNet:       "to-network",
	datapath.MonAtFromOverlay: "from-overlay",
	datapath.MonAtToOverlay:   "to-overlay",
	datapath.MonAtSock:        "socket",
	datapath.MonAtXDPFromNet:  "from-network-xdp",
}

var traces = map[datapath.MonTrace]struct{ name, cube string }{
	datapath.MonTraceLB:          {"service-backend", "lb"},
	datapath.MonTraceSockLB:      {"socket-backend", "lb"},
	datapath.MonTraceSNAT:        {"snat", "nat"},
	datapath.MonTraceMasq:        {"masquerade", "nat"},
	datapath.MonTracePolicy:      {"policy-allowed", "policy"},
	datapath.MonTraceFlowEnd:     {"flow-end", "ct"},
	datapath.MonTraceFlowTimeout: {"flow-timeout", "ct"},
	datapath.MonTraceRoute:       {"route", "router"},
}

var matches = map[datapath.MonPolMatch]string{
	datapath.MonPolPeerPort: "peer-and-port",
	datapath.MonPolPeerAll:  "peer-all-ports",
	datapath.MonPolAnyPort:  "any-peer-and-port",
	datapath.MonPolAnyAll:   "any-peer-all-ports",
	datapath.MonPolHost:     "from-node",
	datapath.MonPolDeny:     "denied",
}

func nameOr[K comparable](m map[K]string, k K) string {
	if s, ok := m[k]; ok {
		return s
	}
	return ""
}

func itoa(v uint32) string {
	if v == 0 {
		return "0"
	}
	var b [10]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}

// routes name how the router sent a packet on (enum mon_route).
var routes = map[datapath.MonRoute]string{
	datapath.MonRoutePod:     "to-pod",
	datapath.MonRouteFIB:     "fib",
	datapath.MonRouteNeigh:   "fib-neighbour",
	datapath.MonRouteOverlay: "to-overlay",
	datapath.MonRouteTunnel:  "tunnel",
}
