package datapath_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestConntrackEvictedFlowIsBalancedAgain: a flow whose entries are gone
// (the GC took them once it was idle past its timeout, or the table was
// flushed) is balanced again on its next packet and both halves are
// written anew, so its replies are still translated back to the Service
// address. (Closed flows leave the table at once so that churn does not
// fill it: TestConntrackLifecycle; a full table: TestConntrackFullRefusesNewFlows.)
func TestConntrackEvictedFlowIsBalancedAgain(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{
		"lb_services": 64, "lb_backends": 64, "lb_revnat": 64, "ct_flows": 256,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	cube := lb.New(dp.Maps())
	if err := cube.Upsert(frontend(vip4, model.TCP), backends(be4)); err != nil {
		t.Fatal(err)
	}
	synIn := pkt.TCP(client4, vip4, syn, nil)
	reply := pkt.TCP(be4, client4, synAck, nil)
	data := pkt.TCP(client4, vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("later"))
	run(t, dp, step{name: "the idle flow's SYN", in: synIn, verdict: actOK, out: pkt.Rewrite(synIn, client4, be4)})
	run(t, dp, step{name: "its reply", toPod: true, in: reply, verdict: actOK, out: pkt.Rewrite(reply, vip4, client4)})

	serviceEntry := datapath.CTKey{Saddr: datapath.AddrFrom(client4.Addr()), Daddr: datapath.AddrFrom(vip4.Addr()),
		Sport: datapath.Port(client4.Port()), Dport: datapath.Port(vip4.Port()), Proto: uint8(model.TCP), Dir: datapath.CTService}
	var e datapath.CTEntry
	if err := dp.Maps().Map(ct.MapFlows).Lookup(&serviceEntry, &e); err != nil {
		t.Fatalf("the flow has no conntrack entry: %v", err)
	}
	// Both halves gone.
	replyEntry := datapath.CTKey{Saddr: datapath.AddrFrom(be4.Addr()), Daddr: datapath.AddrFrom(client4.Addr()),
		Sport: datapath.Port(be4.Port()), Dport: datapath.Port(client4.Port()), Proto: uint8(model.TCP), Dir: datapath.CTReply}
	for _, k := range []datapath.CTKey{serviceEntry, replyEntry} {
		if err := dp.Maps().Map(ct.MapFlows).Delete(&k); err != nil {
			t.Fatalf("evict %+v: %v", k, err)
		}
	}
	run(t, dp, step{name: "the evicted flow's next packet, balanced again", in: data, verdict: actOK, out: pkt.Rewrite(data, client4, be4)})
	run(t, dp, step{name: "its reply, translated back", toPod: true, in: reply, verdict: actOK, out: pkt.Rewrite(reply, vip4, client4)})
}

// ctStat sums counter stat of ct_stats over the CPUs.
func ctStat(t testing.TB, dp *datapath.Datapath, stat datapath.CTStat) uint64 {
	t.Helper()
	var perCPU []uint64
	if err := dp.Maps().Map(ct.MapStats).Lookup(uint32(stat), &perCPU); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n
}

// loadSmallTable loads a datapath whose conntrack holds flows flows (two
// entries each) and one Service, vip4 -> be4; vars are more constants.
func loadSmallTable(t *testing.T, flows uint32, vars map[string]any) *datapath.Datapath {
	t.Helper()
	dp, err := loadTrusting(datapath.Config{Variables: vars, MapSizes: map[string]uint32{
		"lb_services": 64, "lb_backends": 64, "lb_revnat": 64, "ct_flows": 2 * flows,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := lb.New(dp.Maps()).Upsert(frontend(vip4, model.TCP), backends(be4)); err != nil {
		t.Fatal(err)
	}
	return dp
}

// clientPort is client4 on its port plus i: flow i.
func clientPort(i int) netip.AddrPort {
	return netip.AddrPortFrom(client4.Addr(), client4.Port()+uint16(i))
}

// establish runs flow i's handshake through the Service: the SYN, the
// backend's SYN-ACK, the client's ACK (which makes it established).
func establish(t *testing.T, dp *datapath.Datapath, i int) {
	t.Helper()
	in, reply := pkt.TCP(clientPort(i), vip4, syn, nil), pkt.TCP(be4, clientPort(i), synAck, nil)
	ack := pkt.TCP(clientPort(i), vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, nil)
	run(t, dp, step{name: fmt.Sprintf("flow %d's SYN", i), in: in, verdict: actOK, out: pkt.Rewrite(in, clientPort(i), be4)})
	run(t, dp, step{name: fmt.Sprintf("flow %d's SYN-ACK", i), toPod: true, in: reply, verdict: actOK,
		out: pkt.Rewrite(reply, vip4, clientPort(i))})
	run(t, dp, step{name: fmt.Sprintf("flow %d's ACK", i), in: ack, verdict: actOK, out: pkt.Rewrite(ack, clientPort(i), be4)})
}

// TestConntrackFullRefusesNewFlows: when the table is full of established
// flows, a new flow is refused (dropped, counted as an insert failure)
// and the flows it holds keep their entries, their backends and their
// replies' translation: a full table never takes an established flow's
// entry (an LRU's would).
func TestConntrackFullRefusesNewFlows(t *testing.T) {
	testenv.RequireRoot(t)
	const flows = 4
	dp := loadSmallTable(t, flows, nil)
	for i := range flows { // positive control: the table takes as many as it holds
		establish(t, dp, i)
	}
	before, evicted := ctStat(t, dp, datapath.CTStatInsertFailed), ctStat(t, dp, datapath.CTStatEarlyDrop)
	refused := pkt.TCP(clientPort(flows), vip4, syn, nil)
	run(t, dp, step{name: "a new flow, the table full of established flows", in: refused, verdict: actShot, out: refused})
	if n := ctStat(t, dp, datapath.CTStatInsertFailed) - before; n != 1 {
		t.Errorf("insert failures counted: %d, want 1", n)
	}
	if n := ctStat(t, dp, datapath.CTStatEarlyDrop) - evicted; n != 0 {
		t.Errorf("established flows evicted: %d, want none", n)
	}
	for i := range flows {
		data := pkt.TCP(clientPort(i), vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("x"))
		run(t, dp, step{name: fmt.Sprintf("flow %d's next packet, to its backend", i), in: data, verdict: actOK,
			out: pkt.Rewrite(data, clientPort(i), be4)})
	}
}

// TestConntrackEarlyDrop: a table full of flows never established (a
// flood of SYNs from spoofed sources, which the backend answers with
// SYN-ACKs no one completes, holds them for the SYN timeout) gives up the
// oldest of them for each new flow, as netfilter's early drop does: the
// new flow is served, the established flows keep their entries, and the
// evictions are counted. With early drop off (--conntrack-early-drop=false)
// the same table refuses the new flow: the row that failed before it was
// built.
func TestConntrackEarlyDrop(t *testing.T) {
	testenv.RequireRoot(t)
	const established, flood = 2, 3
	fill := func(t *testing.T, dp *datapath.Datapath) {
		// The established flows first: the ring's oldest, which
		// eviction must pass over.
		for i := range established {
			establish(t, dp, i)
		}
		for i := established; i < established+flood; i++ {
			in, reply := pkt.TCP(clientPort(i), vip4, syn, nil), pkt.TCP(be4, clientPort(i), synAck, nil)
			run(t, dp, step{name: fmt.Sprintf("flooding SYN %d", i), in: in, verdict: actOK, out: pkt.Rewrite(in, clientPort(i), be4)})
			run(t, dp, step{name: fmt.Sprintf("the backend's SYN-ACK to flooding SYN %d", i), toPod: true, in: reply, verdict: actOK,
				out: pkt.Rewrite(reply, vip4, clientPort(i))})
		}
	}
	newFlow := established + flood
	syns := func(i int) []byte { return pkt.TCP(clientPort(i), vip4, syn, nil) }

	t.Run("off", func(t *testing.T) {
		dp := loadSmallTable(t, established+flood, map[string]any{"ct_early_drop": uint8(0)})
		fill(t, dp)
		run(t, dp, step{name: "a new flow, the table full, early drop off", in: syns(newFlow), verdict: actShot, out: syns(newFlow)})
	})

	t.Run("on", func(t *testing.T) {
		dp := loadSmallTable(t, established+flood, nil)
		fill(t, dp)
		failed := ctStat(t, dp, datapath.CTStatInsertFailed)
		for j := range flood {
			establish(t, dp, newFlow+j) // each new flow, the table full
		}
		if n := ctStat(t, dp, datapath.CTStatEarlyDrop); n != flood {
			t.Errorf("early drops counted: %d, want %d (one flooding flow per new flow)", n, flood)
		}
		if n := ctStat(t, dp, datapath.CTStatInsertFailed) - failed; n != 0 {
			t.Errorf("insert failures: %d, want none", n)
		}
		// Every flow held is now established: the next new one is
		// refused, and no established flow was ever given up.
		refused := syns(newFlow + flood)
		run(t, dp, step{name: "a new flow, the table full of established flows", in: refused, verdict: actShot, out: refused})
		for i := range established + flood + flood {
			if i >= established && i < established+flood {
				continue // the evicted flood
			}
			data := pkt.TCP(clientPort(i), vip4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("x"))
			run(t, dp, step{name: fmt.Sprintf("established flow %d's next packet, to its backend", i), in: data, verdict: actOK,
				out: pkt.Rewrite(data, clientPort(i), be4)})
		}
		for i := established; i < established+flood; i++ {
			k := datapath.CTKey{Saddr: datapath.AddrFrom(client4.Addr()), Daddr: datapath.AddrFrom(vip4.Addr()),
				Sport: datapath.Port(clientPort(i).Port()), Dport: datapath.Port(vip4.Port()), Proto: uint8(model.TCP), Dir: datapath.CTService}
			if _, ok, err := ct.Lookup(dp.Maps(), k); err != nil || ok {
				t.Errorf("flooding flow %d still held (err %v)", i, err)
			}
		}
	})
}

// TestConntrackEarlyDropLooksPastAnsweredFlows: when a flood fills the
// table, the ring's oldest slots still name the connections of before it,
// answered since; the first new flow after the fill is served all the
// same, from a flood flow behind them (one insert looks at up to 32
// slots; it looked at 8, and the first new connections after a fill
// failed: docs/benchmarks/synflood.md).
func TestConntrackEarlyDropLooksPastAnsweredFlows(t *testing.T) {
	testenv.RequireRoot(t)
	const established = 20
	dp := loadSmallTable(t, established+1, nil)
	for i := range established {
		establish(t, dp, i)
	}
	in := pkt.TCP(clientPort(established), vip4, syn, nil)
	run(t, dp, step{name: "the flooding SYN", in: in, verdict: actOK, out: pkt.Rewrite(in, clientPort(established), be4)})
	failed := ctStat(t, dp, datapath.CTStatInsertFailed)
	establish(t, dp, established+1) // positive control and the row: the table full, served by one eviction
	if n := ctStat(t, dp, datapath.CTStatEarlyDrop); n != 1 {
		t.Errorf("early drops counted: %d, want 1", n)
	}
	if n := ctStat(t, dp, datapath.CTStatInsertFailed) - failed; n != 0 {
		t.Errorf("insert failures: %d, want none", n)
	}
}
