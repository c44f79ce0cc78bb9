package ct_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/events"
)

// TestGCRemovesTimedOutEntriesOnly: a sweep of the real table, by the
// datapath's own sweep, removes each entry whose flow has been idle
// longer than its state's timeout and keeps every other, however old the
// flow, and one refreshed after the sweep read the clock; the metrics
// follow. The timeouts are the defaults but the two longest, shortened
// (established 200 s, UDP stream 100 s): an entry cannot be older than the
// machine's clock (CLOCK_MONOTONIC, from boot), and a fresh machine has
// not been up a day. An entry an earlier agent wrote (no CT_F_HANDSHAKE)
// is established once answered; one this datapath wrote, once its
// handshake is done.
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
		flags   datapath.CTFlags // CTHandshake: written by this datapath (which follows TCP's handshake)
	}
	est, hs := datapath.CTReplied|datapath.CTEstablished, datapath.CTHandshake
	entries := []entry{
		{"TCP established, idle 10 s", 6, datapath.CTReplied, 10 * time.Second, false, 0},
		{"TCP established, idle 190 s", 6, datapath.CTReplied, 190 * time.Second, false, 0},
		{"TCP established, idle 210 s", 6, datapath.CTReplied, 210 * time.Second, true, 0},
		{"TCP unanswered, refreshed after the sweep read the clock", 6, 0, -time.Second, false, 0},
		{"TCP unanswered, idle 50 s", 6, 0, 50 * time.Second, false, 0},
		{"TCP unanswered, idle 70 s", 6, 0, 70 * time.Second, true, 0},
		{"TCP closing, idle 5 s", 6, datapath.CTReplied | datapath.CTClosing, 5 * time.Second, false, 0},
		{"TCP closing, idle 15 s", 6, datapath.CTReplied | datapath.CTClosing, 15 * time.Second, true, 0},
		{"UDP unanswered, idle 20 s", 17, 0, 20 * time.Second, false, 0},
		{"UDP unanswered, idle 40 s", 17, 0, 40 * time.Second, true, 0},
		{"UDP answered, idle 90 s", 17, datapath.CTReplied, 90 * time.Second, false, 0},
		{"UDP answered, idle 110 s", 17, datapath.CTReplied, 110 * time.Second, true, 0},
		{"TCP established (handshake seen), idle 190 s", 6, est, 190 * time.Second, false, hs},
		{"TCP established (handshake seen), idle 210 s", 6, est, 210 * time.Second, true, hs},
		// A SYN-ACK no one completed (a spoofed SYN's): the SYN timeout.
		{"TCP answered, handshake not done, idle 50 s", 6, datapath.CTReplied, 50 * time.Second, false, hs},
		{"TCP answered, handshake not done, idle 70 s", 6, datapath.CTReplied, 70 * time.Second, true, hs},
	}
	key := func(i int, e entry) datapath.CTKey {
		return datapath.CTKey{Saddr: datapath.AddrFrom(netip.MustParseAddr("10.244.1.1")), Daddr: datapath.AddrFrom(netip.MustParseAddr("10.96.0.1")),
			Sport: datapath.Port(uint16(40000 + i)), Dport: datapath.Port(80), Proto: e.proto, Dir: datapath.CTService}
	}
	for i, e := range entries {
		k, v := key(i, e), datapath.CTEntry{BackendId: 1, RevNatId: 1, LastNs: ago(e.idle), State: e.state, Flags: e.flags}
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

// TestGCReportsTimedOutFlows: while the agent traces, a sweep reports each
// timed-out entry with the packets and bytes it counted (one event per
// way, a flow-timeout), keeps a live flow's counters, and removes counters
// whose entry is gone (a flow that ended while nobody traced); with trace
// off, the same timed-out entry is removed unreported.
func TestGCReportsTimedOutFlows(t *testing.T) {
	testenv.RequireRoot(t)
	for ct.Now() < uint64(60*time.Second) {
		time.Sleep(time.Second)
	}
	dp, err := datapath.Load(datapath.Config{MapSizes: map[string]uint32{ct.MapFlows: 64, ct.MapAcct: 64}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	flows, acct := dp.Maps().Map(ct.MapFlows), dp.Maps().Map(ct.MapAcct)
	km := dp.Maps().Map(monitor.MapEvents).(interface{ Unwrap() *ebpf.Map })
	rd, err := ringbuf.NewReader(km.Unwrap())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	gc, err := ct.NewGC(dp.Program("ct_gc"), flows, dp.Maps().Map(ct.MapStats))
	if err != nil {
		t.Fatal(err)
	}

	client, vip := netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("10.96.0.1")
	key := func(port uint16) datapath.CTKey {
		return datapath.CTKey{Saddr: datapath.AddrFrom(client), Daddr: datapath.AddrFrom(vip),
			Sport: datapath.Port(port), Dport: datapath.Port(53), Proto: 17, Dir: datapath.CTService}
	}
	timedOut, live, ended := key(40001), key(40002), key(40003)
	now := ct.Now()
	for k, idle := range map[datapath.CTKey]time.Duration{timedOut: 40 * time.Second, live: time.Second} {
		v := datapath.CTEntry{BackendId: 1, RevNatId: 1, LastNs: now - uint64(idle)}
		if err := flows.Update(&k, &v); err != nil {
			t.Fatal(err)
		}
	}
	counts := map[datapath.CTKey]datapath.CTAcct{timedOut: {Packets: 5, Bytes: 500}, live: {Packets: 2, Bytes: 200}, ended: {Packets: 1, Bytes: 100}}
	for k, c := range counts {
		if err := acct.Update(&k, &c); err != nil {
			t.Fatal(err)
		}
	}
	read := func() []events.Event {
		var out []events.Event
		for {
			rd.SetDeadline(time.Now().Add(20 * time.Millisecond))
			rec, err := rd.Read()
			if err != nil {
				return out
			}
			e, err := events.Decode(rec.RawSample, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
	}

	// Trace on: the timed-out entry is reported with its counters; the
	// counters of a flow gone are removed, a live flow's kept.
	if err := monitor.SetFlags(dp.Maps(), datapath.MonFlagTrace); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Sweep(); err != nil {
		t.Fatal(err)
	}
	got := read()
	want := events.FlowCounts{Packets: 5, Bytes: 500}
	if len(got) != 1 || got[0].Trace != "flow-timeout" || got[0].Counts == nil || *got[0].Counts != want ||
		got[0].Src != netip.AddrPortFrom(client, 40001) || got[0].Dst != netip.AddrPortFrom(vip, 53) || got[0].Proto != "UDP" {
		t.Fatalf("events %v, want the timed-out flow with %+v", got, want)
	}
	var c datapath.CTAcct
	for k, what := range map[datapath.CTKey]string{timedOut: "the reported flow's", ended: "a flow gone's"} {
		if acct.Lookup(&k, &c) == nil {
			t.Errorf("%s counters stayed", what)
		}
	}
	if acct.Lookup(&live, &c) != nil || c.Packets != 2 {
		t.Errorf("the live flow's counters: %+v", c)
	}

	// Trace off: the same timed out again goes unreported.
	if err := monitor.SetFlags(dp.Maps(), 0); err != nil {
		t.Fatal(err)
	}
	v := datapath.CTEntry{BackendId: 1, RevNatId: 1, LastNs: now - uint64(40*time.Second)}
	if err := flows.Update(&timedOut, &v); err != nil {
		t.Fatal(err)
	}
	tc := counts[timedOut]
	if err := acct.Update(&timedOut, &tc); err != nil {
		t.Fatal(err)
	}
	if res, err := gc.Sweep(); err != nil || res.Removed != 1 {
		t.Fatalf("sweep %+v, %v: want the timed-out entry removed", res, err)
	}
	if got := read(); len(got) != 0 {
		t.Errorf("trace off: reported %v", got)
	}
}
