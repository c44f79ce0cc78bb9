package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestBatchWritesAnLPMTrie: the policy cube writes and deletes its maps
// in batches (cube.PutBatch, cube.RemoveBatch): an LPM trie across more
// than one chunk, and a hash map. A delete batch meeting keys already
// gone goes on past them (the kernel stops at each), and removes the
// rest. The metrics are told every entry written or deleted (a batch at
// once, not entry by entry).
func TestBatchWritesAnLPMTrie(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	m := dp.Maps()
	observed := map[string]int{}
	m.Observe = func(name, op string, n int, err error) {
		if name == "pol_entries" && err == nil {
			observed[op] += n
		}
	}
	const n = 5000 // more than one chunk
	keys, vals := make([]datapath.PolicyEntryKey, n), make([]datapath.PolicyEntry, n)
	for i := range keys {
		keys[i] = datapath.PolicyEntryKey{Prefixlen: datapath.PolicyEntryBits + 16, RuleSet: uint32(i + 1),
			Dir: datapath.PolicyIngress, Proto: 6, Peer: datapath.Identity(300 + i%7), Port: uint16(i)}
		vals[i].Allow = 1
	}
	count := func() int {
		got := 0
		if err := cube.Each(m, "pol_entries", func(datapath.PolicyEntryKey, datapath.PolicyEntry) bool { got++; return true }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if w, err := cube.PutBatch(m, "pol_entries", keys, vals); err != nil || w != n {
		t.Fatalf("batch write of %d entries: %d written, err %v", n, w, err)
	}
	if got := count(); got != n {
		t.Fatalf("pol_entries holds %d entries after a batch write of %d", got, n)
	}
	if observed["update"] != n {
		t.Errorf("metrics told of %d updates after a batch write of %d", observed["update"], n)
	}

	// Every other key removed one by one; then the batch over all of
	// them meets a missing key at every other step.
	for i := 0; i < n; i += 2 {
		if err := cube.Remove(m, "pol_entries", keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(); got != n/2 {
		t.Fatalf("pol_entries holds %d entries, want %d", got, n/2)
	}
	if r, err := cube.RemoveBatch(m, "pol_entries", keys); err != nil || r != n/2 {
		t.Fatalf("batch delete over %d keys, %d of them present: removed %d, err %v", n, n/2, r, err)
	}
	if got := count(); got != 0 {
		t.Fatalf("pol_entries holds %d entries after the batch delete", got)
	}
	// n/2 removed one by one, n/2 by the batch, and the n/2 the batch
	// found gone already (counted as deletes, as Remove counts them).
	if observed["delete"] != 3*n/2 {
		t.Errorf("metrics told of %d deletes, want %d", observed["delete"], 3*n/2)
	}

	// A hash map the same way: pol_endpoints.
	addrs := []datapath.Addr{datapath.AddrFrom(netip.MustParseAddr("10.0.0.1")), datapath.AddrFrom(netip.MustParseAddr("10.0.0.2")),
		datapath.AddrFrom(netip.MustParseAddr("fd00::3"))}
	eps := []datapath.PolicyEndpoint{{Id: 1}, {Id: 2}, {Id: 3}}
	if w, err := cube.PutBatch(m, "pol_endpoints", addrs, eps); err != nil || w != len(addrs) {
		t.Fatalf("batch write of %d endpoints: %d written, err %v", len(addrs), w, err)
	}
	if err := cube.Remove(m, "pol_endpoints", addrs[1]); err != nil {
		t.Fatal(err)
	}
	if r, err := cube.RemoveBatch(m, "pol_endpoints", addrs); err != nil || r != 2 {
		t.Fatalf("batch delete of 3 endpoints, 2 present: removed %d, err %v", r, err)
	}
	for _, a := range addrs {
		if _, ok, err := cube.Get[datapath.Addr, datapath.PolicyEndpoint](m, "pol_endpoints", a); ok || err != nil {
			t.Errorf("endpoint %v still there (err %v) after the batch delete", a, err)
		}
	}
	if _, err := cube.RemoveBatch(m, "pol_entries", []uint32{1}); err == nil {
		t.Error("a batch delete with keys of the wrong size: no error")
	}
}
