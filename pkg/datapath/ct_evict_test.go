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

// TestConntrackFullRefusesNewFlows: when the table is full, a new flow is
// refused (dropped, counted as an insert failure) and the flows it holds
// keep their entries, their backends and their replies' translation: a
// full table never takes a live flow's entry (an LRU's would).
func TestConntrackFullRefusesNewFlows(t *testing.T) {
	testenv.RequireRoot(t)
	const flows = 4
	dp, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{
		"lb_services": 64, "lb_backends": 64, "lb_revnat": 64, "ct_flows": 2 * flows,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := lb.New(dp.Maps()).Upsert(frontend(vip4, model.TCP), backends(be4)); err != nil {
		t.Fatal(err)
	}
	insertFailures := func() uint64 {
		var perCPU []uint64
		if err := dp.Maps().Map(ct.MapStats).Lookup(uint32(datapath.CTStatInsertFailed), &perCPU); err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		return n
	}
	client := func(i int) netip.AddrPort { return netip.AddrPortFrom(client4.Addr(), client4.Port()+uint16(i)) }
	for i := range flows { // positive control: the table takes as many as it holds
		in := pkt.TCP(client(i), vip4, syn, nil)
		run(t, dp, step{name: fmt.Sprintf("flow %d", i), in: in, verdict: actOK, out: pkt.Rewrite(in, client(i), be4)})
	}
	before := insertFailures()
	refused := pkt.TCP(client(flows), vip4, syn, nil)
	run(t, dp, step{name: "a new flow, the table full", in: refused, verdict: actShot, out: refused})
	if n := insertFailures() - before; n != 1 {
		t.Errorf("insert failures counted: %d, want 1", n)
	}
	for i := range flows {
		reply := pkt.TCP(be4, client(i), synAck, nil)
		run(t, dp, step{name: fmt.Sprintf("flow %d's reply", i), toPod: true, in: reply, verdict: actOK,
			out: pkt.Rewrite(reply, vip4, client(i))})
	}
}
