package bgp

import (
	"net/netip"
	"time"
)

// DoNotListen is Config.ListenPort's value (and the meaning of its zero
// value) for a speaker that accepts no incoming sessions: it only connects
// out to its peers, so that the agent never needs port 179 on the node.
const DoNotListen int32 = -1

// DefaultPeerPort is the TCP port of a peer when Peer.Port is 0.
const DefaultPeerPort = 179

// DefaultConnectRetry is how long a peer that cannot be reached waits before
// the next attempt when Peer.ConnectRetry is 0. GoBGP's own default (120 s)
// is long for a router on the node's own link coming back.
const DefaultConnectRetry = 5 * time.Second

// Config is the speaker's whole configuration.
type Config struct {
	// LocalASN is the node's AS number.
	LocalASN uint32
	// RouterID is the BGP identifier: an IPv4 address, usually the node's.
	RouterID netip.Addr
	// ListenPort is where incoming sessions are accepted; 0 or DoNotListen
	// (-1): none are.
	ListenPort int32
	// ListenAddresses are the addresses listened on when ListenPort > 0
	// (empty: all).
	ListenAddresses []netip.Addr
	// Peers are the routers to connect to.
	Peers []Peer
}

// Family is an address family a session carries.
type Family string

const (
	IPv4Unicast Family = "ipv4-unicast"
	IPv6Unicast Family = "ipv6-unicast"
)

// GracefulRestart is a peer's graceful restart (RFC 4724) setting.
type GracefulRestart struct {
	Enabled bool
	// RestartTime is how long the router is asked to keep our routes
	// after the session went down without a NOTIFICATION (0: 120 s; at
	// most 4095 s, the field's 12 bits).
	RestartTime time.Duration
}

// Peer is one router the speaker connects to.
type Peer struct {
	Address netip.Addr
	ASN     uint32
	// Port is the router's TCP port (0: DefaultPeerPort).
	Port uint16
	// EBGPMultihopTTL is the TTL of an eBGP session to a router more than
	// one hop away (0: off, the router must be on a connected network).
	EBGPMultihopTTL uint8
	// HoldTime and KeepaliveInterval (0: GoBGP's 90 s and 30 s). The hold
	// time is negotiated down to the smaller of both sides'.
	HoldTime          time.Duration
	KeepaliveInterval time.Duration
	// ConnectRetry is the wait between connection attempts (0:
	// DefaultConnectRetry).
	ConnectRetry time.Duration
	// Password is the TCP MD5 signature key (RFC 2385); empty: none.
	Password        string
	GracefulRestart GracefulRestart
	// Families the session carries (empty: IPv4 and IPv6 unicast, both on
	// this one multiprotocol session whatever the address family of
	// Address is).
	Families []Family
}

// Route is one prefix to advertise to every peer whose session carries its
// family.
type Route struct {
	// Prefix must be masked (10.244.1.0/24, not 10.244.1.7/24).
	Prefix netip.Prefix
	// NextHop is the next hop to announce. The zero value means "self":
	// GoBGP then puts the session's local address there. That is right
	// for an IPv4 route, and for an IPv6 route on an IPv6 session; an IPv6
	// route announced over an IPv4 session has no IPv6 local address to
	// use, so it must be given here (the node's IPv6 address on the link
	// to the router): Apply refuses a zero one rather than announce a
	// next hop the router would reject. Its family must be the prefix's.
	NextHop netip.Addr
	// Communities in "65000:100" form or well-known names ("no-export",
	// "no-advertise", "no-peer", "blackhole", ...).
	Communities []string
	// LocalPref (0: not set). GoBGP sends it to iBGP peers only, as the
	// protocol says.
	LocalPref uint32
}
