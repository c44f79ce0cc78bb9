package lb

import (
	"math/bits"
	"math/rand/v2"
	"net/netip"

	"github.com/netcube/netcube/pkg/datapath"
)

// backendTable is what the cube knows of each backend in lb_backends: its
// key, id and how many slots hold it, found by key (a frontend acquiring
// it) and by id (a slot releasing it). There is one entry per backend, a
// million at 100,000 Services of 10 endpoints, which made two Go maps
// (key -> id and refs, id -> key) the largest part of the agent's heap
// (~92 bytes per backend). Here each entry is stored once, 16 bytes in
// chunks that never move (an IPv4 backend's key in the entry itself; any
// other key, 20 bytes, in a side table), and both indexes are
// open-addressed arrays of 4-byte positions: ~32 bytes per IPv4 backend,
// and nothing for the garbage collector to scan.
type backendTable struct {
	chunks [][]backendEntry // position p is chunks[p/backendChunk][p%backendChunk]
	free   []uint32         // positions of removed entries, reused first
	n      int
	seed   uint64 // of the key hash
	// byKey and byID hold position+1 of each entry (0: empty slot).
	byKey, byID []uint32
	// wide holds the keys that are not an IPv4 address with no flags
	// (IPv6 ones), by index; wideFree, the indexes of removed ones.
	wide     []datapath.Backend
	wideFree []uint32
}

// backendEntry is one backend. Its key is keyOf's: an IPv4 address (the
// last word of its IPv4-mapped form) with port and protocol, or, if wide,
// an index in backendTable.wide.
type backendEntry struct {
	addr  uint32 // !wide: the IPv4 address word; wide: index in backendTable.wide
	port  uint16
	proto uint8
	wide  bool
	id    uint32
	refs  uint32 // slots (and draining holds) pointing at the backend
}

// v4Mapped is datapath.AddrFrom's third word of an IPv4 address.
var v4Mapped = datapath.AddrFrom(netip.AddrFrom4([4]byte{})).W[2]

// narrow says whether k fits in an entry: an IPv4 address, no flags.
func narrow(k datapath.Backend) bool {
	return k.Addr.W[0] == 0 && k.Addr.W[1] == 0 && k.Addr.W[2] == v4Mapped && k.Flags == 0
}

// keyOf is e's key.
func (t *backendTable) keyOf(e *backendEntry) datapath.Backend {
	if e.wide {
		return t.wide[e.addr]
	}
	var k datapath.Backend
	k.Addr.W[2], k.Addr.W[3] = v4Mapped, e.addr
	k.Port, k.Proto = e.port, e.proto
	return k
}

// is says whether e's key is k.
func (t *backendTable) is(e *backendEntry, k datapath.Backend) bool {
	if e.wide {
		return t.wide[e.addr] == k
	}
	return e.addr == k.Addr.W[3] && e.port == k.Port && e.proto == k.Proto && narrow(k)
}

// entry makes the entry for k (taking a wide slot if it needs one).
func (t *backendTable) entry(k datapath.Backend, id, refs uint32) backendEntry {
	if narrow(k) {
		return backendEntry{addr: k.Addr.W[3], port: k.Port, proto: k.Proto, id: id, refs: refs}
	}
	var i uint32
	if n := len(t.wideFree); n > 0 {
		i, t.wideFree = t.wideFree[n-1], t.wideFree[:n-1]
		t.wide[i] = k
	} else {
		i = uint32(len(t.wide))
		t.wide = append(t.wide, k)
	}
	return backendEntry{addr: i, wide: true, id: id, refs: refs}
}

// backendChunk entries are allocated at a time: growing never copies
// (or doubles) the entries, only the indexes.
const backendChunk = 1024

func newBackendTable() *backendTable {
	return &backendTable{seed: rand.Uint64()}
}

// len is the number of backends.
func (t *backendTable) len() int { return t.n }

// get returns the entry for k, or nil. The pointer stays valid until the
// entry is removed.
func (t *backendTable) get(k datapath.Backend) *backendEntry {
	if t.n == 0 {
		return nil
	}
	_, p, ok := t.findKey(k)
	if !ok {
		return nil
	}
	return t.at(p)
}

// getID returns the entry with id, or nil.
func (t *backendTable) getID(id uint32) *backendEntry {
	if t.n == 0 {
		return nil
	}
	_, p, ok := t.findID(id)
	if !ok {
		return nil
	}
	return t.at(p)
}

// add records a backend that is in neither index (the caller has checked
// both: a key or id already present would be indexed twice).
func (t *backendTable) add(k datapath.Backend, id, refs uint32) {
	if 4*(t.n+1) > 3*len(t.byKey) {
		t.grow()
	}
	var p uint32
	if n := len(t.free); n > 0 {
		p, t.free = t.free[n-1], t.free[:n-1]
	} else {
		last := len(t.chunks) - 1
		if last < 0 || len(t.chunks[last]) == backendChunk {
			t.chunks = append(t.chunks, make([]backendEntry, 0, backendChunk))
			last++
		}
		p = uint32(last)*backendChunk + uint32(len(t.chunks[last]))
		t.chunks[last] = t.chunks[last][:len(t.chunks[last])+1]
	}
	*t.at(p) = t.entry(k, id, refs)
	t.insert(t.byKey, t.keySlot(k), p)
	t.insert(t.byID, idSlot(id, len(t.byID)), p)
	t.n++
}

// remove drops the backend with id (nothing if there is none).
func (t *backendTable) remove(id uint32) {
	if t.n == 0 {
		return
	}
	is, p, ok := t.findID(id)
	if !ok {
		return
	}
	ks, _, _ := t.findKey(t.keyOf(t.at(p)))
	t.erase(t.byID, is, func(p uint32) int { return idSlot(t.at(p).id, len(t.byID)) })
	t.erase(t.byKey, ks, func(p uint32) int { return t.keySlot(t.keyOf(t.at(p))) })
	if e := t.at(p); e.wide {
		t.wide[e.addr] = datapath.Backend{}
		t.wideFree = append(t.wideFree, e.addr)
	}
	*t.at(p) = backendEntry{}
	t.free = append(t.free, p)
	t.n--
}

func (t *backendTable) at(p uint32) *backendEntry {
	return &t.chunks[p/backendChunk][p%backendChunk]
}

// findKey returns k's slot in byKey and its entry's position; if k is
// absent, the empty slot where it would go.
func (t *backendTable) findKey(k datapath.Backend) (slot int, p uint32, ok bool) {
	size := len(t.byKey)
	for i := t.keySlot(k); ; i = next(i, size) {
		v := t.byKey[i]
		if v == 0 {
			return i, 0, false
		}
		if t.is(t.at(v-1), k) {
			return i, v - 1, true
		}
	}
}

func (t *backendTable) findID(id uint32) (slot int, p uint32, ok bool) {
	size := len(t.byID)
	for i := idSlot(id, size); ; i = next(i, size) {
		v := t.byID[i]
		if v == 0 {
			return i, 0, false
		}
		if t.at(v-1).id == id {
			return i, v - 1, true
		}
	}
}

// keySlot is k's home slot in byKey. The hash (wyhash's mixing) is seeded
// per table: endpoint addresses come from the cluster, and must not be
// able to choose colliding keys. (maphash.Comparable moves its argument
// to the heap: an allocation per lookup.)
func (t *backendTable) keySlot(k datapath.Backend) int {
	a := uint64(k.Addr.W[0]) | uint64(k.Addr.W[1])<<32
	b := uint64(k.Addr.W[2]) | uint64(k.Addr.W[3])<<32
	c := uint64(k.Port) | uint64(k.Proto)<<16 | uint64(k.Flags)<<24
	h := mix(a^t.seed^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
	h = mix(h^c, t.seed^0x8ebc6af09c88c6e3)
	return reduce(h, len(t.byKey))
}

// reduce maps a 64-bit hash to a slot of an index of size slots (any
// size: its high half times size, shifted down).
func reduce(h uint64, size int) int { return int((h >> 32) * uint64(size) >> 32) }

// next is the slot after i, wrapping around.
func next(i, size int) int {
	if i++; i == size {
		return 0
	}
	return i
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// idSlot is id's home slot in an index of size slots: Fibonacci hashing
// spreads the consecutive ids the cube allocates.
func idSlot(id uint32, size int) int {
	return reduce(uint64(id)*0x9E3779B97F4A7C15, size)
}

// insert puts position p in the first empty slot from home on.
func (t *backendTable) insert(index []uint32, home int, p uint32) {
	i := home
	for index[i] != 0 {
		i = next(i, len(index))
	}
	index[i] = p + 1
}

// erase empties slot i and moves back the entries after it that would
// otherwise no longer be found (linear probing's deletion: no tombstones,
// so lookups stay short after any number of removals).
func (t *backendTable) erase(index []uint32, i int, home func(p uint32) int) {
	size := len(index)
	dist := func(from, to int) int { return (to - from + size) % size } // forward, wrapping
	index[i] = 0
	for j := next(i, size); index[j] != 0; j = next(j, size) {
		h := home(index[j] - 1)
		// The entry at j may move to i if its home is not in (i, j].
		if dist(h, j) >= dist(i, j) {
			index[i], index[j] = index[j], 0
			i = j
		}
	}
}

// grow doubles both indexes (kept at most 3/4 full) and reinserts every
// entry.
func (t *backendTable) grow() { t.resize(max(64, 2*len(t.byKey))) }

// reserve makes room for n backends in all, so that adding them does not
// grow the indexes step by step (each step's old arrays are garbage, and
// the last ones come when the table is largest). The indexes are sized
// for n exactly (3/4 full), not to a power of two, which at a million
// backends would have left them half empty (16 MB where 11 do).
func (t *backendTable) reserve(n int) {
	if size := (4*(n+1) + 2) / 3; 4*(n+1) > 3*len(t.byKey) {
		t.resize(max(64, size+size/64)) // a little room to spare
	}
}

// resize rebuilds both indexes with size slots (any size).
func (t *backendTable) resize(size int) {
	old := t.byKey
	t.byKey, t.byID = make([]uint32, size), make([]uint32, size)
	for _, v := range old {
		if v != 0 {
			e := t.at(v - 1)
			t.insert(t.byKey, t.keySlot(t.keyOf(e)), v-1)
			t.insert(t.byID, idSlot(e.id, size), v-1)
		}
	}
}
