package model

import (
	"fmt"
	"net/netip"
)

// Proto is an IP protocol number.
type Proto uint8

const (
	TCP  Proto = 6
	UDP  Proto = 17
	SCTP Proto = 132 // Services (the datapath keeps its CRC32c: bpf/cubes/nat/sctp.h) and NetworkPolicy ports
)

func (p Proto) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	case SCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto-%d", uint8(p))
}

// Frontend is an address the clients use: a ClusterIP, port and protocol.
type Frontend struct {
	Addr  netip.Addr
	Port  uint16
	Proto Proto
	// Internal: the in-cluster twin of a frontend with
	// externalTrafficPolicy Local (flag TwoScopes), which clients inside
	// the cluster reach instead, with every endpoint.
	Internal bool
}

func (f Frontend) String() string {
	s := fmt.Sprintf("%s/%s", netip.AddrPortFrom(f.Addr, f.Port), f.Proto)
	if f.Internal {
		s += " (in-cluster)"
	}
	return s
}

// Backend is an endpoint address and port serving a frontend.
type Backend struct {
	Addr netip.Addr
	Port uint16
}

func (b Backend) String() string { return netip.AddrPortFrom(b.Addr, b.Port).String() }

// ServiceID names a Service.
type ServiceID struct {
	Namespace, Name string
}

func (s ServiceID) String() string { return s.Namespace + "/" + s.Name }

// Frontends is the desired state of one Service: each of its frontends with
// the backends behind it (possibly none: the frontend then rejects). A
// slice, not a map: a Service has a handful of frontends, and at 100,000
// Services a map each would be tens of MB.
type Frontends []FrontendBackends

// FrontendBackends is one frontend, its options and its backends.
type FrontendBackends struct {
	Frontend Frontend
	Flags    FrontendFlags
	// Affinity is the ClientIP session affinity timeout in seconds; 0:
	// none.
	Affinity uint32
	Backends []Backend
	// Draining are terminating endpoints that new flows no longer get but
	// whose established flows keep their backend until they end.
	Draining []Backend
	// SourceRanges: with the SourceRanges flag, the clients allowed.
	SourceRanges []netip.Prefix
}

// FrontendFlags are a frontend's options (the lb cube turns them into
// the datapath's enum lb_svc_flags).
type FrontendFlags uint16

const (
	// External: reached from outside the cluster through this node
	// (NodePort, ExternalIP, LoadBalancer IP); its source is translated
	// to the node unless Local.
	External FrontendFlags = 1 << iota
	// Local: externalTrafficPolicy Local (on External frontends) or
	// internalTrafficPolicy Local (on ClusterIPs). Only this node's
	// endpoints are backends, the client's address is kept, and with none
	// the packet is dropped, not refused.
	Local
	// Maglev: new flows are placed by Maglev consistent hashing instead of
	// at random.
	Maglev
	// SourceRanges: only clients within FrontendBackends.SourceRanges may
	// reach the frontend (a LoadBalancer IP with loadBalancerSourceRanges).
	SourceRanges
	// Announce: a LoadBalancer IP this node serves, which it answers ARP
	// and IPv6 neighbour solicitations for on its uplinks (every node for
	// externalTrafficPolicy Cluster; with Local, a node with a ready
	// endpoint), so that the link reaches it with no route.
	Announce
	// TwoScopes: externalTrafficPolicy Local on an External frontend that
	// has an in-cluster twin (Frontend.Internal): pods and the node reach
	// every endpoint through it, as kube-proxy's "short-circuit" sends
	// them.
	TwoScopes
)

// Find returns fe's backends, if fe is one of the frontends.
func (fs Frontends) Find(fe Frontend) ([]Backend, bool) {
	for _, f := range fs {
		if f.Frontend == fe {
			return f.Backends, true
		}
	}
	return nil, false
}
