package ct_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestGCRemovesTimedOutEntriesOnly: a sweep of the real table, by the
// datapath's own sweep, removes each entry whose flow has been idle
// longer than its state's timeout and keeps every other, however old the
// flow, and one refreshed after the sweep read the clock; the metrics
// follow. The timeouts are the defaults but the two longest, shortened
// (established 200 s, UDP stream 100 s): an entry cannot be older than the
// machine's clock (CLOCK_MONOTONIC, from boot), and a fresh machine has
// not been up a day.
func TestGCRemovesTimedOutEntriesOnly(t *testing.T) {
	testenv.RequireRoot(t)
	cfg := ct.Defaults()
	cfg.TCPEstablished.Duration, cfg.UDPStream.Duration = 200*time.Second, 100*time.Second
	for ct.Now() < uint64(220*time.Second) { // just booted: wait until the oldest entry can exist
		time.Sleep(time.Second)
	}
	vars, err := cfg.Variables()
	if err != nil {
		t.Fatal(err)
	}
	dp, err := datapath.Load(datapath.Config{MapSizes: map[string]uint32{ct.MapFlows: 64}, Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	flows := dp.Maps().Map(ct.MapFlows)

	now := ct.Now()
	ago := func(d time.Duration) uint64 { return now - uint64(d) }
	type entry struct {
		name    string
		proto   uint8
		state   datapath.CTState
		idle    time.Duration
		removed bool
	}
	entries := []entry{
		{"TCP established, idle 10 s", 6, datapath.CTReplied, 10 * time.Second, false},
		{"TCP established, idle 190 s", 6, datapath.CTReplied, 190 * time.Second, false},
		{"TCP established, idle 210 s", 6, datapath.CTReplied, 210 * time.Second, true},
		{"TCP unanswered, refreshed after the sweep read the clock", 6, 0, -time.Second, false},
		{"TCP unanswered, idle 50 s", 6, 0, 50 * time.Second, false},
		{"TCP unanswered, idle 70 s", 6, 0, 70 * time.Second, true},
		{"TCP closing, idle 5 s", 6, datapath.CTReplied | datapath.CTClosing, 5 * time.Second, false},
		{"TCP closing, idle 15 s", 6, datapath.CTReplied | datapath.CTClosing, 15 * time.Second, true},
		{"UDP unanswered, idle 20 s", 17, 0, 20 * time.Second, false},
		{"UDP unanswered, idle 40 s", 17, 0, 40 * time.Second, true},
		{"UDP answered, idle 90 s", 17, datapath.CTReplied, 90 * time.Second, false},
		{"UDP answered, idle 110 s", 17, datapath.CTReplied, 110 * time.Second, true},
	}
	key := func(i int, e entry) datapath.CTKey {
		return datapath.CTKey{Saddr: datapath.AddrFrom(netip.MustParseAddr("10.244.1.1")), Daddr: datapath.AddrFrom(netip.MustParseAddr("10.96.0.1")),
			Sport: datapath.Port(uint16(40000 + i)), Dport: datapath.Port(80), Proto: e.proto, Dir: datapath.CTService}
	}
	for i, e := range entries {
		k, v := key(i, e), datapath.CTEntry{BackendId: 1, RevNatId: 1, LastNs: ago(e.idle), State: e.state}
		if err := flows.Update(&k, &v); err != nil {
			t.Fatal(err)
		}
	}

	gc, err := ct.NewGC(dp.Program("ct_gc"), flows, dp.Maps().Map(ct.MapStats))
	if err != nil {
		t.Fatal(err)
	}
	res, err := gc.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i, e := range entries {
		k := key(i, e)
		var v datapath.CTEntry
		gone := flows.Lookup(&k, &v) != nil
		if gone != e.removed {
			t.Errorf("%s: removed %v, want %v", e.name, gone, e.removed)
		}
		if e.removed {
			want++
		}
	}
	if res.Seen != uint64(len(entries)) || res.Removed != uint64(want) {
		t.Errorf("sweep saw %d and removed %d; want %d and %d", res.Seen, res.Removed, len(entries), want)
	}
	// A second sweep finds only the live ones, and removes nothing.
	if res, err = gc.Sweep(); err != nil || res.Seen != uint64(len(entries)-want) || res.Removed != 0 {
		t.Errorf("second sweep: %+v, %v; want %d seen, none removed", res, err, len(entries)-want)
	}
}
