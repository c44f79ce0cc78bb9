package datapath_test

import (
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestConntrackEvictedFlowIsBalancedAgain: when the (LRU) conntrack table
// is full and evicts an idle flow's entries, its next packet is balanced
// again and both halves are written anew, so its replies are still
// translated back to the Service address. (Closed flows leave the table at
// once so that churn does not fill it: TestConntrackLifecycle; here, what
// happens when a flow is evicted all the same.)
func TestConntrackEvictedFlowIsBalancedAgain(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := datapath.Load(datapath.Config{MapSizes: map[string]uint32{
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
	// Evicted as the LRU would (which entries it takes under churn is the
	// kernel's choice, not something a test can force): both halves gone.
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
