package model

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// BGPPeering is a NetworkBGPPeering: the BGP sessions of the nodes it
// selects, and what they advertise on them (package bgp).
type BGPPeering struct {
	Name string
	// Nodes selects the nodes that run these sessions.
	Nodes    labels.Selector
	LocalASN uint32
	// RouterID is the BGP identifier (zero: the node's IPv4 address).
	RouterID netip.Addr
	Peers    []BGPPeer
	// Advertise is what the selected nodes announce.
	Advertise BGPAdvertise
}

// BGPPeer is one neighbour of a BGPPeering.
type BGPPeer struct {
	Address netip.Addr
	ASN     uint32
	// Port is the peer's TCP port (179 when zero).
	Port uint16
	// EBGPMultihop is the TTL of an eBGP session to a peer more than one
	// hop away (0: directly connected).
	EBGPMultihop uint8
	// HoldTime and Keepalive (zero: 90 s and a third of it).
	HoldTime, Keepalive time.Duration
	// PasswordSecret names the Secret key holding the TCP MD5 password
	// (nil: none), in the agent's namespace.
	PasswordSecret *SecretKey
	// GracefulRestart keeps the peer's routes while this node's speaker
	// restarts, for up to RestartTime (RFC 4724).
	GracefulRestart bool
	RestartTime     time.Duration
	// Families are the address families of the session: IPv4 and/or IPv6
	// unicast (empty: both).
	Families []Family
}

// SecretKey is one key of a Secret.
type SecretKey struct{ Name, Key string }

// BGPAdvertise is what a BGPPeering's nodes announce.
type BGPAdvertise struct {
	// PodCIDRs: the node's own pod CIDRs (spec.podCIDRs).
	PodCIDRs bool
	// LoadBalancerIPs, ExternalIPs, ClusterIPs: a Service's addresses of
	// that kind, as /32 and /128, from every selected node for
	// externalTrafficPolicy Cluster (ClusterIPs always) and only from the
	// nodes with a ready local endpoint for Local.
	LoadBalancerIPs, ExternalIPs, ClusterIPs bool
	// Services adds path attributes to the Services a selector picks
	// (the first that matches); a Service none picks gets none.
	Services []BGPServiceAttributes
}

// BGPServiceAttributes are the path attributes of the routes of the
// Services Selector picks.
type BGPServiceAttributes struct {
	Selector labels.Selector
	// Communities as "ASN:value" or a well-known name (no-export, ...).
	Communities []string
	// LocalPreference (0: unset), for iBGP peers.
	LocalPreference uint32
}
