package policy

import (
	"net/netip"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Direction is the side of a pod a policy entry guards.
type Direction uint8

const (
	Ingress = Direction(datapath.PolicyIngress) // traffic the pod receives
	Egress  = Direction(datapath.PolicyEgress)  // traffic the pod sends
)

func (d Direction) String() string {
	if d == Ingress {
		return "ingress"
	}
	return "egress"
}

// Endpoint is a pod of this node as the datapath knows it: its number
// (its drops, its verdict events), the number of its rule set in the
// policy entries (shared by this node's pods of its namespace with its
// labels and named ports, which the same policies give the same rules),
// and the directions some policy isolates it in (a direction no policy
// isolates is not looked up at all).
type Endpoint struct {
	ID                              uint32
	RuleSet                         uint32
	IsolatedIngress, IsolatedEgress bool
}

// Entry allows a rule set's traffic in one direction with a peer identity
// (AnyPeer: every peer), protocol (0: every protocol, every port) and the
// ports whose first PortBits bits are Port's (16: Port alone; 0: every
// port): a port range is a few such prefixes, as a longest-prefix-match
// table holds them.
//
// Its fields fill 16 bytes with no padding (pad is always zero), so the
// compiler's maps of entries, tens of thousands of keys, hash and compare
// a key as one 16-byte word rather than field by field.
type Entry struct {
	RuleSet  uint32
	Peer     Identity
	Port     uint16
	Dir      Direction
	Proto    model.Proto
	PortBits uint8
	pad      [3]uint8
}

// Tables are what the policy cube writes to the datapath for one node.
type Tables struct {
	// Peers maps addresses to identities (the identity cache): each pod
	// address, each IP block region, this node's addresses (Host).
	// Addresses in none are World.
	Peers map[netip.Prefix]Identity
	// Endpoints are this node's policy-enforcing pods, by address.
	Endpoints map[netip.Addr]Endpoint
	// Entries are the allowed (endpoint, direction, peer, port) tuples.
	Entries map[Entry]struct{}
	// Verdicts are the tier sets' entries (tiers.go): each allows (true)
	// or denies. Their rule sets are never NetworkPolicy's.
	Verdicts map[Entry]bool
	// Warnings name what matches nothing (a named port no destination pod
	// has): not errors, but likely not what the author meant.
	Warnings []Warning
}

// Warning is something of a policy that matches nothing.
type Warning struct {
	Policy model.PolicyID
	Msg    string
}
