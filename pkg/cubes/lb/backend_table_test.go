package lb

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/netcube/netcube/pkg/datapath"
)

// TestBackendTableMatchesMaps: random adds, reference changes and removals
// (with the index growing, and entries moved back on removal) leave the
// table answering as the two Go maps it replaces would, by key and by id.
func TestBackendTableMatchesMaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newBackendTable()
	byKey := map[datapath.Backend]uint32{}
	byID := map[uint32]datapath.Backend{}
	refs := map[uint32]uint32{}
	key := func() datapath.Backend {
		var k datapath.Backend
		if rng.IntN(2) == 0 { // an IPv4 address: kept in the entry itself
			k.Addr = datapath.AddrFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(8))}))
		} else { // any other: in the table of wide keys
			k.Addr.W[0] = 10 | uint32(rng.IntN(8))<<24 // few addresses: keys repeat
		}
		k.Port = uint16(rng.IntN(300))
		k.Proto = uint8(6 + 11*rng.IntN(2))
		return k
	}
	nextID := uint32(1)
	for step := range 200000 {
		if step == 50000 { // indexes of a size that is no power of two
			tab.reserve(tab.len() + 3001)
		}
		switch op := rng.IntN(10); {
		case op < 5: // add a backend not there yet
			k := key()
			if _, ok := byKey[k]; ok {
				continue
			}
			tab.add(k, nextID, 1)
			byKey[k], byID[nextID], refs[nextID] = nextID, k, 1
			nextID++
		case op < 7: // take another reference
			k := key()
			if e := tab.get(k); e != nil {
				e.refs++
				refs[e.id]++
			}
		default: // remove an id, which may be gone already
			id := uint32(rng.IntN(int(nextID)) + 1)
			tab.remove(id)
			if k, ok := byID[id]; ok {
				delete(byKey, k)
				delete(byID, id)
				delete(refs, id)
			}
		}
		if step%10000 != 0 && step != 199999 {
			continue
		}
		if tab.len() != len(byID) {
			t.Fatalf("step %d: %d backends, want %d", step, tab.len(), len(byID))
		}
		for id, k := range byID {
			e := tab.getID(id)
			if e == nil || tab.keyOf(e) != k || e.refs != refs[id] {
				t.Fatalf("step %d: id %d: %+v, want key %+v refs %d", step, id, e, k, refs[id])
			}
			if e2 := tab.get(k); e2 != e {
				t.Fatalf("step %d: key %+v: entry %p, by id %p", step, k, e2, e)
			}
		}
		for id := range nextID + 10 {
			if _, ok := byID[id]; !ok && tab.getID(id) != nil {
				t.Fatalf("step %d: id %d removed, still found", step, id)
			}
		}
	}
}
