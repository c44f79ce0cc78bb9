package policy_test

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// TestPolicyCheckCost prints what a SYN costs in from_pod with the
// benchmark's policies (the sender egress-isolated) and with none:
// BPF_PROG_RUN's per-run time. The repeats are one connection's SYN,
// retransmitted: the first is judged and written to conntrack, the rest
// pass on that entry (what a new connection costs in full, the judgement
// and the entry's insert and removal, is in `netcube-lab bench policy`). A figure, not a timed
// assertion: `go test ./pkg/cubes/policy -run PolicyCheckCost -v`.
func TestPolicyCheckCost(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := datapath.Load(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	cl := policy.ScaleCluster(10, 20, 100, []string{"node1", "node2"})
	// ns0/p0 (app a0, node1) sends; its egress allowed to app a1 on 8080.
	sel, _ := labels.Parse("app=a0")
	to, _ := labels.Parse("app=a1")
	id := model.PolicyID{Namespace: "ns0", Name: "egress"}
	cl.SetPolicy(id, &model.Policy{ID: id, Pods: sel, IsolatesEgress: true,
		Egress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: to}}, Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8080}}}}})
	src := netip.AddrPortFrom(netip.MustParseAddr("10.200.0.1"), 40000)
	dst := netip.AddrPortFrom(netip.MustParseAddr("10.200.0.2"), 8080) // ns0/p1: app a1
	syn := pkt.TCP(src, dst, pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, nil)
	run := func() (float64, uint32) {
		verdict, per, err := dp.Programs().FromPod.Benchmark(syn, 200000, nil)
		if err != nil {
			t.Fatal(err)
		}
		return float64(per.Nanoseconds()), verdict
	}
	none, v0 := run()
	c := policy.NewCompiler()
	local := func(p *model.Pod) bool { return p.Node == "node1" }
	isolated := c.Compile(cl, local, nil)
	if err := policy.Sync(dp.Maps(), nil, isolated); err != nil {
		t.Fatal(err)
	}
	with, v1 := run()
	// Without the egress policy the sender is ingress-isolated only: its
	// SYN costs the endpoint lookup and the connection's record.
	cl.SetPolicy(id, nil)
	recorded := c.Compile(cl, local, nil)
	if err := policy.Sync(dp.Maps(), isolated, recorded); err != nil {
		t.Fatal(err)
	}
	only, v2 := run()
	if v0 == 2 || v1 == 2 || v2 == 2 {
		t.Fatalf("dropped (verdicts %d, %d, %d)", v0, v1, v2)
	}
	t.Logf("from_pod, a retransmitted TCP SYN: %.0f ns with no policy; with %d entries, %.0f ns with the sender egress-isolated (+%.0f ns: "+
		"endpoint, conntrack entry), %.0f ns with it not (+%.0f ns: endpoint, conntrack entry)",
		none, len(isolated.Entries), with, with-none, only, only-none)
}
