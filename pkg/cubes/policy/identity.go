package policy

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Identity names a class of addresses no policy can tell apart: the pods
// of one namespace with the same labels whose addresses lie in the same IP
// blocks, or the addresses outside every pod that lie in the same IP
// blocks. The datapath looks up a packet's peer address once (the
// identity cache) and then its policy entries by identity, so a lookup
// costs the same with 10 policies as with 10,000.
type Identity uint32

const (
	// AnyPeer in a policy entry allows every peer.
	AnyPeer = Identity(datapath.IdentityAnyPeer)
	// Host is this node's own addresses: what it sends a pod (kubelet's
	// probes) is always allowed, as every provider does.
	Host = Identity(datapath.IdentityHost)
	// World is an address of no pod and in no IP block of any policy.
	World = Identity(datapath.IdentityWorld)
	// firstAllocated is the first identity handed out to a class.
	firstAllocated Identity = 256
)

// Identities hands out identities to classes and keeps them for the life
// of the agent: a class keeps its number while it exists, so a change
// rewrites only the entries of the classes it changes.
type Identities struct {
	ids  map[string]Identity
	next Identity
}

// NewIdentities returns an empty allocator.
func NewIdentities() *Identities {
	return &Identities{ids: map[string]Identity{}, next: firstAllocated}
}

func (ids *Identities) of(key string) Identity {
	if id, ok := ids.ids[key]; ok {
		return id
	}
	id := ids.next
	ids.next++
	ids.ids[key] = id
	return id
}

// blockSet is every distinct prefix (cidr or except) of every ipBlock: an
// address's position among them is its block signature.
type blockSet []netip.Prefix

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// signature is the set of block prefixes holding a.
func (bs blockSet) signature(a netip.Addr) []netip.Prefix {
	var sig []netip.Prefix
	for _, p := range bs {
		if p.Contains(a) {
			sig = append(sig, p)
		}
	}
	return sig
}

// signatureOf is the set of block prefixes holding all of p: p's own
// ancestors among the blocks, and p.
func (bs blockSet) signatureOf(p netip.Prefix) []netip.Prefix {
	var sig []netip.Prefix
	for _, q := range bs {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			sig = append(sig, q)
		}
	}
	return sig
}

func sigKey(sig []netip.Prefix) string {
	var b strings.Builder
	for _, p := range sig {
		b.WriteString(p.String())
		b.WriteByte(' ')
	}
	return b.String()
}

// labelsKey renders labels canonically.
func labelsKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(l[k])
		b.WriteByte(0)
	}
	return b.String()
}

// class is one identity's members as the rules see them: pods of one
// namespace with the same labels and block signature (members: the pods,
// by how many of their addresses), or a range outside the pods (members
// nil).
type class struct {
	id      Identity
	key     string // what Identities knows it by
	ns      string
	labels  map[string]string // any member's: all have the same
	sig     []netip.Prefix
	members map[model.PodID]int
}

// inBlock says whether the class's addresses are all in b (its cidr in
// the signature, none of its excepts).
func (c *class) inBlock(b *model.IPBlock) bool {
	if !slices.Contains(c.sig, b.CIDR) {
		return false
	}
	for _, e := range b.Except {
		if slices.Contains(c.sig, e) {
			return false
		}
	}
	return true
}
