package policy

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// BenchmarkTrieWriteOrder: a new identity's port ranges written into
// pol_entries (then deleted) in the order a Go map hands them out, as
// SyncChanges writes them, and in the trie's own order (sortTrieKeys),
// alternated within each iteration so that both meet the same moment of
// a noisy host. The trie holds what 10,000 policies compile to; the keys
// are those of a class change (ScaleChanges' "class"). Prints each
// order's median ns per key written and deleted, and what the sort
// costs per key: more than the order saves, which is why SyncChanges
// does not sort. Needs root.
// `go test -run XXX -bench TrieWriteOrder ./pkg/cubes/policy`.
func BenchmarkTrieWriteOrder(b *testing.B) {
	testenv.RequireRoot(b)
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer dp.Close()
	m := dp.Maps()
	cl := ScaleClusterSpread(10, 20, 1000, []string{"node1", "node2"}, SpreadSame)
	c := NewCompiler()
	t := c.Compile(cl, func(p *model.Pod) bool { return p.Node == "node1" }, []netip.Addr{netip.MustParseAddr("172.30.0.11")})
	if err := SyncChanges(m, t, c.Changes()); err != nil {
		b.Fatal(err)
	}
	c.Update(ScaleChanges()[1].Make(cl, 0)) // a class made
	var w syncBatches
	w.fill(c.Tables(), c.Changes())
	keys := w.entries
	if len(keys) < 100 {
		b.Fatalf("a class change writes %d trie keys; the benchmark wants hundreds", len(keys))
	}
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	sorted := slices.Clone(keys)
	sortTrieKeys(sorted)
	allow := make([]datapath.PolicyEntry, len(keys))
	for i := range allow {
		allow[i].Allow = 1
	}
	timed := func(ks []datapath.PolicyEntryKey) (write, del time.Duration) {
		t0 := time.Now()
		if _, err := cube.PutBatch(m, MapEntries, ks, allow); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := cube.RemoveBatch(m, MapEntries, ks); err != nil {
			b.Fatal(err)
		}
		return t1.Sub(t0), time.Since(t1)
	}
	var shuffledW, shuffledD, sortedW, sortedD, sorts []float64
	perKey := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(len(keys)) }
	for i := 0; b.Loop(); i++ {
		first, second := keys, sorted
		if i%2 == 1 {
			first, second = sorted, keys
		}
		w1, d1 := timed(first)
		w2, d2 := timed(second)
		if i%2 == 1 {
			w1, d1, w2, d2 = w2, d2, w1, d1
		}
		shuffledW, shuffledD = append(shuffledW, perKey(w1)), append(shuffledD, perKey(d1))
		sortedW, sortedD = append(sortedW, perKey(w2)), append(sortedD, perKey(d2))
		again := slices.Clone(keys)
		t0 := time.Now()
		sortTrieKeys(again)
		sorts = append(sorts, perKey(time.Since(t0)))
	}
	median := func(s []float64) float64 { slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(float64(len(keys)), "keys")
	b.ReportMetric(median(shuffledW), "map-order-write-ns/key")
	b.ReportMetric(median(sortedW), "trie-order-write-ns/key")
	b.ReportMetric(median(shuffledD), "map-order-delete-ns/key")
	b.ReportMetric(median(sortedD), "trie-order-delete-ns/key")
	b.ReportMetric(median(sorts), "sort-ns/key")
}

// sortTrieKeys sorts pol_entries keys into the trie's order: by the bits
// it branches on (the bytes after the prefix length, each byte's high
// bit first), then by prefix length.
func sortTrieKeys(keys []datapath.PolicyEntryKey) {
	bytesOf := func(k *datapath.PolicyEntryKey) []byte {
		return unsafe.Slice((*byte)(unsafe.Pointer(k)), unsafe.Sizeof(*k))
	}
	slices.SortFunc(keys, func(a, b datapath.PolicyEntryKey) int {
		ab, bb := bytesOf(&a), bytesOf(&b)
		return cmp.Or(bytes.Compare(ab[4:], bb[4:]), bytes.Compare(ab[:4], bb[:4]))
	})
}
