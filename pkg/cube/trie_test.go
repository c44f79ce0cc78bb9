package cube_test

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/netcube/netcube/pkg/cube"
)

// trieKey is laid out as the policy cube's pol_entries keys are: a
// prefix length, then host-order numbers and a big-endian port.
type trieKey struct {
	Prefixlen uint32
	RuleSet   uint32
	Peer      uint32
	Port      [2]byte
	Pad       uint16
}

// commonBits is how many leading bits (the trie's order: each byte's
// high bit first) of two keys' data agree.
func commonBits(a, b trieKey) int {
	ab := unsafe.Slice((*byte)(unsafe.Pointer(&a)), unsafe.Sizeof(a))[4:]
	bb := unsafe.Slice((*byte)(unsafe.Pointer(&b)), unsafe.Sizeof(b))[4:]
	for i := range ab {
		if x := ab[i] ^ bb[i]; x != 0 {
			return 8*i + bits.LeadingZeros8(x)
		}
	}
	return 8 * len(ab)
}

// inTrieOrder says whether each key shares at least as many leading bits
// with the key after it as with any key further on: the order in which
// each walk from the trie's root follows the path of the one before.
func inTrieOrder(keys []trieKey) bool {
	for i := range keys {
		for j := i + 2; j < len(keys); j++ {
			if commonBits(keys[i], keys[j]) > commonBits(keys[i], keys[i+1]) {
				return false
			}
		}
	}
	return true
}

func TestSortTrieKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var keys []trieKey
	for range 300 {
		k := trieKey{Prefixlen: 64 + uint32(r.IntN(17)), RuleSet: 0x80000000 | uint32(r.IntN(40)), Peer: uint32(256 + r.IntN(50))}
		binary.BigEndian.PutUint16(k.Port[:], uint16(1000+r.IntN(2000)))
		keys = append(keys, k)
	}
	want := map[trieKey]int{}
	for _, k := range keys {
		want[k]++
	}
	if inTrieOrder(keys) {
		t.Fatal("the random keys are in the trie's order already: the test proves nothing")
	}
	cube.SortTrieKeys(keys)
	if !inTrieOrder(keys) {
		t.Error("sorted keys are not in the trie's order")
	}
	for _, k := range keys {
		want[k]--
	}
	for k, n := range want {
		if n != 0 {
			t.Errorf("key %+v: %d more before the sort than after", k, n)
		}
	}
}
