package model

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
)

// Service is what netcube reads of a Kubernetes Service: converted once, when
// it arrives, so neither the source nor the reconciler keeps API objects
// (at 100,000 Services those would be most of the agent's memory). It
// takes 112 bytes and nothing else for most Services: its ClusterIPs are
// in place and its ports a reference to a list many share.
type Service struct {
	ID ServiceID
	// Created is metadata.creationTimestamp in Unix seconds (0: unknown,
	// as in most manifest files): of two Services claiming one frontend,
	// the older one has it.
	Created int64
	// clusterIPs: spec.clusterIPs, at most one per family (the API's
	// limit), in place rather than in a list of their own (ClusterIPs);
	// an unused one is the zero Addr.
	clusterIPs [MaxClusterIPs]netip.Addr
	ports      *[]ServicePort // nil: none; Ports
	// External is how the Service is reached from outside the cluster;
	// nil for most Services (ClusterIP only), which then cost nothing more.
	External *ExternalAccess
	// Affinity: sessionAffinity ClientIP's timeout in seconds; 0: none.
	Affinity uint32
	// InternalLocal: internalTrafficPolicy Local (pods reach only their
	// node's endpoints through the ClusterIPs).
	InternalLocal bool
	// Algorithm: how new flows pick a backend, if the Service says
	// (annotation netcube.io/lb-algorithm); else the agent's default.
	Algorithm Algorithm
	// PreferClose: topology-aware routing (trafficDistribution
	// PreferClose/PreferSameZone, or the topology-mode annotation Auto):
	// endpoints hinted for this node's zone are preferred.
	PreferClose bool
	// PreferSameNode (trafficDistribution PreferSameNode): endpoints hinted
	// for this node first, then as PreferClose.
	PreferSameNode bool
}

// MaxClusterIPs is how many ClusterIPs a Service has at most: one per
// family.
const MaxClusterIPs = 2

// ClusterIPs are the Service's cluster IPs (spec.clusterIPs), in order.
func (s *Service) ClusterIPs() []netip.Addr {
	n := 0
	for n < MaxClusterIPs && s.clusterIPs[n].IsValid() {
		n++
	}
	return s.clusterIPs[:n:n]
}

// SetClusterIPs sets the Service's cluster IPs to the first MaxClusterIPs
// valid addresses of ips; it returns how many it kept.
func (s *Service) SetClusterIPs(ips []netip.Addr) int {
	s.clusterIPs = [MaxClusterIPs]netip.Addr{}
	n := 0
	for _, ip := range ips {
		if ip.IsValid() && n < MaxClusterIPs {
			s.clusterIPs[n] = ip
			n++
		}
	}
	return n
}

// Ports are the Service's ports; the list may be shared: never change its
// elements.
func (s *Service) Ports() []ServicePort {
	if s.ports == nil {
		return nil
	}
	return *s.ports
}

// SetPorts sets the Service's ports to ps, or to an equal list other
// Services share.
func (s *Service) SetPorts(ps []ServicePort) { s.ports = sharedServicePorts(ps) }

// Algorithm is a load-balancing algorithm.
type Algorithm uint8

const (
	AlgorithmDefault Algorithm = iota // the agent's --lb-algorithm
	AlgorithmRandom                   // a random backend per new flow
	AlgorithmMaglev                   // Maglev consistent hashing of the flow
)

// ServicePort is one port of a Service.
type ServicePort struct {
	Name     string
	Port     uint16
	NodePort uint16 // 0: none
	Proto    Proto
}

// ExternalAccess: a Service's NodePorts (in its ports), ExternalIPs and
// LoadBalancer ingress IPs, and its externalTrafficPolicy.
type ExternalAccess struct {
	IPs             []netip.Addr // spec.externalIPs
	LoadBalancerIPs []netip.Addr // status.loadBalancer.ingress[].ip
	// ForeignLoadBalancer: spec.loadBalancerClass names another
	// controller (not netcube's), which wrote LoadBalancerIPs: netcube's
	// pools do not bound them.
	ForeignLoadBalancer bool
	// Restricted: loadBalancerSourceRanges were given, so only clients in
	// SourceRanges may reach the LoadBalancer IPs, in each family only
	// those of its family (none of a family: no client of it).
	Restricted   bool
	SourceRanges []netip.Prefix
	// Walled: a source range could not be read, so no client at all may
	// reach the LoadBalancer IPs (fail closed); SourceRanges is empty.
	Walled    bool
	LocalOnly bool // externalTrafficPolicy: Local
	// Labels are the Service's labels: what a NetworkBGPPeering's
	// per-Service attributes select by (kept only for Services reached
	// from outside, which are few).
	Labels map[string]string
	// HealthCheckNodePort (LocalOnly): where this node tells load
	// balancers how many local endpoints it has; 0: none.
	HealthCheckNodePort uint16
}

// Node is what the Service translation needs to know of this node.
// NodeInfo is a node as its Node object describes it.
type NodeInfo struct {
	Name string
	Zone string // topology.kubernetes.io/zone ("": unknown)
	// Labels are the Node's labels (what a NetworkBGPPeering selects by).
	Labels    map[string]string
	Addresses []netip.Addr // status.addresses that are IPs
	// PodCIDRs are spec.podCIDRs (at most one per family): where the
	// node's pods get their addresses, and what other nodes route to it.
	PodCIDRs []netip.Prefix
}

type Node struct {
	Name  string       // endpoints with this nodeName are local
	Addrs []netip.Addr // NodePorts are served on these
	// Algorithm is the agent's default (Random or Maglev).
	Algorithm Algorithm
	// Zone is the node's topology.kubernetes.io/zone ("": unknown).
	Zone string
}

// EndpointSlice is what netcube reads of a Kubernetes EndpointSlice. It
// takes 64 bytes (there are two per dual-stack Service): its Service is a
// name, the namespace being the slice's own; its family is whether it has
// an IPv6 address table, and its ports a reference to a list most slices
// share (ports.go).
type EndpointSlice struct {
	// ServiceName is the kubernetes.io/service-name label: the slice
	// serves the Service of that name in its own namespace.
	ServiceName string
	Endpoints   []Endpoint // added with Add; their addresses are read with Addr
	// ChangeTriggered is when the change this version of the slice
	// carries began (the endpoints.kubernetes.io/last-change-trigger-time
	// annotation the EndpointSlice controller writes), in Unix
	// nanoseconds; 0: not said. Network programming latency is measured
	// from it.
	ChangeTriggered int64
	ports           *[]EndpointPort // nil: none
	// v6 holds the addresses of an IPv6 slice's endpoints, which name
	// theirs by index: an IPv4 endpoint keeps its address itself. nil:
	// an IPv4 slice.
	v6 *[][16]byte
}

// NewEndpointSlice returns an empty slice of the Service named service (in
// the slice's namespace), of addressType IPv6 if v6 (else IPv4).
func NewEndpointSlice(service string, v6 bool) *EndpointSlice {
	s := &EndpointSlice{ServiceName: service}
	if v6 {
		s.v6 = new([][16]byte)
	}
	return s
}

// IPv6 says whether the slice's addressType is IPv6 (else IPv4).
func (s *EndpointSlice) IPv6() bool { return s.v6 != nil }

// Ports are the slice's ports; the list may be shared: never change its
// elements.
func (s *EndpointSlice) Ports() []EndpointPort {
	if s.ports == nil {
		return nil
	}
	return *s.ports
}

// SetPorts sets the slice's ports to ps, or to an equal list other slices
// share.
func (s *EndpointSlice) SetPorts(ps []EndpointPort) {
	s.ports = sharedEndpointPorts(ps)
}

// Reserve makes room for n more endpoints.
func (s *EndpointSlice) Reserve(n int) {
	s.Endpoints = slices.Grow(s.Endpoints, n)
	if s.IPv6() {
		*s.v6 = slices.Grow(*s.v6, n)
	}
}

// Add appends an endpoint at addr, of the slice's family, placed as p (the
// zero Placement: unknown), with no condition set; it returns it, to set
// them.
func (s *EndpointSlice) Add(addr netip.Addr, p Placement) *Endpoint {
	e := Endpoint{placement: internPlacement(p)}
	if s.IPv6() {
		e.addr = uint32(len(*s.v6))
		*s.v6 = append(*s.v6, addr.As16())
	} else {
		e.addr = binary.BigEndian.Uint32(addr.AsSlice())
	}
	s.Endpoints = append(s.Endpoints, e)
	return &s.Endpoints[len(s.Endpoints)-1]
}

// Addr is the address of e, one of s.Endpoints.
func (s *EndpointSlice) Addr(e *Endpoint) netip.Addr {
	if s.IPv6() {
		return netip.AddrFrom16((*s.v6)[e.addr])
	}
	var a [4]byte
	binary.BigEndian.PutUint32(a[:], e.addr)
	return netip.AddrFrom4(a)
}

// EndpointPort is one port of an EndpointSlice: the target of the Service
// port of the same name and protocol.
type EndpointPort struct {
	Name  string
	Port  uint16
	Proto Proto
}

// Endpoint is one endpoint of an EndpointSlice, with its conditions
// resolved as the API defines them (unset ready means ready; unset serving
// means serving = ready). It takes 12 bytes and no pointer (there are a
// million at 100,000 Services of 10 endpoints, and the garbage collector
// does not scan arrays without pointers, where a netip.Addr has one): an
// IPv4 address itself, an IPv6 one as its index in the slice (read both
// with EndpointSlice.Addr), and the placement as an index in an interned
// table (placement.go).
type Endpoint struct {
	addr        uint32 // IPv4: the address; IPv6: index in EndpointSlice.v6
	placement   uint32 // 0: unknown
	Ready       bool
	Serving     bool
	Terminating bool
}

// Placement is the endpoint's node and hints; nil: unknown.
func (e *Endpoint) Placement() *Placement { return placementAt(e.placement) }

// Placement is an endpoint's node and topology hints. Endpoints refer to
// one shared value per distinct placement (a handful per node).
type Placement struct {
	NodeName string
	// ForZones and ForNodes: the zones and nodes the EndpointSlice
	// controller hints the endpoint for, comma-separated ("": none; one in
	// practice).
	ForZones, ForNodes string
}

// NodeName is the endpoint's node ("": unknown).
func (e *Endpoint) NodeName() string {
	if p := e.Placement(); p != nil {
		return p.NodeName
	}
	return ""
}

// Hinted says whether the endpoint has zone hints.
func (e *Endpoint) Hinted() bool { p := e.Placement(); return p != nil && p.ForZones != "" }

// HintedForNode says whether the endpoint is hinted for node (and so
// whether it has node hints at all, with node "").
func (e *Endpoint) HintedForNode(node string) bool {
	p := e.Placement()
	if p == nil || p.ForNodes == "" {
		return false
	}
	return node == "" || listed(p.ForNodes, node)
}

func listed(list, x string) bool {
	for v := range strings.SplitSeq(list, ",") {
		if v == x {
			return true
		}
	}
	return false
}

// HintedFor says whether the endpoint is hinted for zone.
func (e *Endpoint) HintedFor(zone string) bool {
	if !e.Hinted() {
		return false
	}
	for z := range strings.SplitSeq(e.Placement().ForZones, ",") {
		if z == zone {
			return true
		}
	}
	return false
}
