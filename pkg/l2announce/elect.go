package l2announce

import (
	"hash/fnv"
	"net/netip"
	"slices"
	"sync"
)

// Score is node's rendezvous weight for address ip: FNV-1a of the
// address's 16 bytes and the node's name, through a 64-bit finalizer
// (murmur3's fmix64: FNV alone barely mixes the last bytes into the high
// ones, and names often differ in their last byte only).
func Score(ip netip.Addr, node string) uint64 {
	h := fnv.New64a()
	b := ip.Unmap().As16()
	h.Write(b[:])
	h.Write([]byte(node))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Elect is the announcer of ip among eligible: the node of the highest
// Score (a tie, which takes a 64-bit collision, to the smaller name); ""
// if none is eligible. It depends on the set alone, not its order: every
// agent with the same view elects the same node.
func Elect(ip netip.Addr, eligible []string) string {
	best, bestScore := "", uint64(0)
	for _, n := range eligible {
		s := Score(ip, n)
		if best == "" || s > bestScore || s == bestScore && n < best {
			best, bestScore = n, s
		}
	}
	return best
}

// Elector answers, for the lb cube (lb.Elector), whether this node is
// the announcer of a LoadBalancer IP, from the membership's alive nodes;
// the first time it is for an address (since it was not), it calls
// becameAnnouncer (the gratuitous ARP / unsolicited NA), which must not
// block.
type Elector struct {
	m               *Membership
	becameAnnouncer func(ip netip.Addr)

	mu       sync.Mutex
	mine     map[netip.Addr]bool // the addresses this node was last elected for
	cache    map[netip.Addr]string
	cacheGen uint64 // the view the cache (every-node elections) is of
}

// NewElector elects from m's alive nodes; becameAnnouncer may be nil.
func NewElector(m *Membership, becameAnnouncer func(ip netip.Addr)) *Elector {
	return &Elector{m: m, becameAnnouncer: becameAnnouncer, mine: map[netip.Addr]bool{}, cache: map[netip.Addr]string{}}
}

// Elected says whether this node announces ip: the eligible nodes are
// the alive ones among every node known (everyNode: externalTrafficPolicy
// Cluster), or among withEndpoints (Local: the nodes with a ready
// endpoint of the Service).
func (e *Elector) Elected(ip netip.Addr, everyNode bool, withEndpoints []string) bool {
	v := e.m.current()
	self := e.m.self
	e.mu.Lock()
	defer e.mu.Unlock()
	var winner string
	if everyNode {
		if e.cacheGen != v.gen {
			clear(e.cache)
			e.cacheGen = v.gen
		}
		var ok bool
		if winner, ok = e.cache[ip]; !ok {
			winner = Elect(ip, v.list)
			e.cache[ip] = winner
		}
	} else {
		eligible := make([]string, 0, len(withEndpoints))
		for _, n := range withEndpoints {
			if v.alive[n] {
				eligible = append(eligible, n)
			}
		}
		winner = Elect(ip, eligible)
	}
	mine := winner == self
	if mine && !e.mine[ip] && e.becameAnnouncer != nil {
		e.becameAnnouncer(ip)
	}
	if mine {
		e.mine[ip] = true
	} else {
		delete(e.mine, ip)
	}
	return mine
}

// Announcing lists the addresses this node was last elected for, sorted.
func (e *Elector) Announcing() []netip.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []netip.Addr{}
	for ip, mine := range e.mine {
		if mine {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// Membership is the elector's membership.
func (e *Elector) Membership() *Membership { return e.m }
