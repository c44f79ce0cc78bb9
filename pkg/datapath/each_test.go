package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestEachReadsInBatches: cube.Each reads a kernel hash map many entries
// per call (kernelMap.LookupBatches) and an LPM trie, which has no batch
// lookup, entry by entry: every entry once, as written, across several
// batches; and it stops where its caller says.
func TestEachReadsInBatches(t *testing.T) {
	testenv.RequireRoot(t)
	const n = 10000 // more than two of Each's batches
	dp, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{"lb_backends": n}})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	m := dp.Maps()
	ids, bs := make([]uint32, n), make([]datapath.Backend, n)
	for i := range n {
		ids[i] = uint32(i + 1)
		bs[i] = datapath.Backend{Addr: datapath.AddrFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})), Port: uint16(i)}
	}
	if _, err := cube.PutBatch(m, "lb_backends", ids, bs); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Map("lb_backends").(interface {
		LookupBatches(keys, values any, fn func(n int) bool) error
	}); !ok {
		t.Fatal("the kernel's lb_backends reads no batches: Each would take two system calls per entry")
	}
	seen := make(map[uint32]bool, n)
	err = cube.Each(m, "lb_backends", func(id uint32, b datapath.Backend) bool {
		if seen[id] {
			t.Errorf("backend %d read twice", id)
		}
		seen[id] = true
		if i := int(id) - 1; i < 0 || i >= n || b != bs[i] {
			t.Errorf("backend %d read as %+v", id, b)
		}
		return true
	})
	if err != nil || len(seen) != n {
		t.Fatalf("read %d of %d backends, err %v", len(seen), n, err)
	}
	calls := 0
	if err := cube.Each(m, "lb_backends", func(uint32, datapath.Backend) bool { calls++; return calls < 5000 }); err != nil || calls != 5000 {
		t.Errorf("asked to stop at the 5,000th backend: called %d times, err %v", calls, err)
	}

	// An LPM trie (no batch lookup): read entry by entry, all of them.
	peers := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.2.0.0/16"), netip.MustParsePrefix("fd00::/64")}
	for i, p := range peers {
		if err := cube.Put(m, "pol_peers", datapath.PrefixFrom(p), datapath.PolicyPeer{Identity: datapath.Identity(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	if err := cube.Each(m, "pol_peers", func(datapath.Prefix, datapath.PolicyPeer) bool { got++; return true }); err != nil || got != len(peers) {
		t.Errorf("pol_peers: read %d of %d, err %v", got, len(peers), err)
	}
}
