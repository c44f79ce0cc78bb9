package policy_test

import (
	"fmt"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/cubes/router"
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
	dp, err := loadTrusting(datapath.Config{})
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

// TestSameNodePacketCost prints what a packet of an established
// connection between two pods of this node costs in from_pod, which
// judges it for both (the sender's egress, then the receiver's ingress)
// and hands it to the receiver: with no policy, and with both pods
// isolated by the benchmark's policies (the verdicts already in the
// connection's conntrack entry). BPF_PROG_RUN's per-run time, medians of
// interleaved rounds. A figure, not a timed assertion:
// `go test ./pkg/cubes/policy -run SameNodePacketCost -v`.
func TestSameNodePacketCost(t *testing.T) {
	dp, client, server, on := sameNodePair(t)
	c4, s4 := netip.AddrPortFrom(client, 40000), netip.AddrPortFrom(server, 8080)
	ack := pkt.TCP(c4, s4, pkt.TCPOpts{ACK: true, Seq: 2, Ack: 10}, []byte("x"))
	const actRedirect = 7
	run := func() float64 {
		verdict, per, err := dp.Programs().FromPod.Benchmark(ack, 200000, nil)
		if err != nil {
			t.Fatal(err)
		}
		if verdict != actRedirect {
			t.Fatalf("the packet was not delivered (verdict %d)", verdict)
		}
		return float64(per.Nanoseconds())
	}
	var none, with []float64
	var have *policy.Tables
	for range 5 {
		if err := policy.Sync(dp.Maps(), have, &policy.Tables{}); err != nil {
			t.Fatal(err)
		}
		have = &policy.Tables{}
		none = append(none, run())
		if err := policy.Sync(dp.Maps(), have, on); err != nil {
			t.Fatal(err)
		}
		have = on
		// The connection's opening, judged both ways and recorded.
		if v := runProg(t, dp.Programs().FromPod, pkt.TCP(c4, s4, pkt.TCPOpts{SYN: true, Seq: 1}, nil)); v != actRedirect {
			t.Fatalf("the SYN was not delivered (verdict %d)", v)
		}
		with = append(with, run())
	}
	sort.Float64s(none)
	sort.Float64s(with)
	t.Logf("from_pod, an established TCP packet between two pods of this node: %.0f ns with no policy, %.0f ns with both isolated (+%.0f ns; %d entries)",
		none[2], with[2], with[2]-none[2], len(on.Entries))
}

// TestVerdictEventCost prints what a new connection's first packet costs
// in from_pod between two isolated pods of this node, judged both ways,
// with the policy verdict events on (two per connection: the agent's
// default) and off: BPF_PROG_RUN's time of each SYN, a new connection
// each, summed over blocks of connections that alternate the two modes.
// The ring buffer is read between blocks, as the agent reads it, never
// while a block runs: this is the events' cost in the program itself,
// without a reader's cache traffic. A figure, not a
// timed assertion: `go test ./pkg/cubes/policy -run VerdictEventCost -v`.
func TestVerdictEventCost(t *testing.T) {
	dp, c, server, on := sameNodePair(t)
	s4 := netip.AddrPortFrom(server, 8080)
	if err := policy.Sync(dp.Maps(), nil, on); err != nil {
		t.Fatal(err)
	}
	drain := eventDrain(t, dp)
	const actRedirect, block, blocks = 7, 200, 10
	sent := func() uint64 { return cube.PerCPUSum(dp.Maps().Map(monitor.MapStats), uint32(datapath.MonStatSent)) }
	next := uint16(10000)
	total := map[bool]time.Duration{}
	for b := range 2 * blocks {
		events := b%2 == 0
		flags := datapath.MonFlagDrops
		if events {
			flags |= datapath.MonFlagPolicy
		}
		if err := monitor.SetFlags(dp.Maps(), flags); err != nil {
			t.Fatal(err)
		}
		drain()
		before := sent()
		for range block {
			cp := netip.AddrPortFrom(c, next)
			next++
			v, d, err := dp.Programs().FromPod.Benchmark(pkt.TCP(cp, s4, pkt.TCPOpts{SYN: true, Seq: 1}, nil), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v != actRedirect {
				t.Fatalf("a SYN was not delivered (verdict %d)", v)
			}
			total[events] += d
			// Closed at once, so the table stays as small as the bench's.
			if v := runProg(t, dp.Programs().FromPod, pkt.TCP(cp, s4, pkt.TCPOpts{RST: true, Seq: 2}, nil)); v != actRedirect {
				t.Fatalf("a RST was not delivered (verdict %d)", v)
			}
		}
		if n, want := sent()-before, map[bool]uint64{true: 2 * block, false: 0}[events]; n != want {
			t.Fatalf("events sent in a block (verdict events %v): %d, want %d: the figure would not be the one printed", events, n, want)
		}
	}
	withEvents, without := float64(total[true].Nanoseconds())/(block*blocks), float64(total[false].Nanoseconds())/(block*blocks)
	t.Logf("from_pod, a new connection's SYN between two isolated pods of this node: %.0f ns with the verdict events on (two), %.0f ns off (+%.0f ns per event)",
		withEvents, without, (withEvents-without)/2)
}

// sameNodePair loads a datapath with the benchmark's policies (ScaleCluster:
// 1,000 policies over 200 pods) and two pods of node1 routed to: the
// sender ns0/p0 (app a0), egress-isolated, may send to app a1 on 8080
// only; the receiver ns0/p6 (app a1) accepts app a0 on 8080 only. It
// returns the datapath, the two pods' addresses and the node's tables
// with the policies (not yet written).
func sameNodePair(t *testing.T) (dp *datapath.Datapath, client, server netip.Addr, on *policy.Tables) {
	t.Helper()
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	client, server = netip.MustParseAddr("10.200.0.1"), netip.MustParseAddr("10.200.0.7")
	for i, a := range []netip.Addr{client, server} {
		ep := datapath.RouterEndpoint{Ifindex: uint32(100 + i), PodMac: [6]byte{2, 0xaa, 0, 0, 0, byte(i)}, HostMac: [6]byte{2, 0xbb, 0, 0, 0, byte(i)}}
		if err := cube.Put(dp.Maps(), router.MapEndpoints, datapath.AddrFrom(a), ep); err != nil {
			t.Fatal(err)
		}
	}
	on = policy.NewCompiler().Compile(sameNodeCluster(), func(p *model.Pod) bool { return p.Node == "node1" }, nil)
	if _, ok := on.Endpoints[server]; !ok {
		t.Fatal("the receiver is not a policy endpoint of node1: the figure would not be the one printed")
	}
	return dp, client, server, on
}

var (
	a0, _ = labels.Parse("app=a0")
	a1, _ = labels.Parse("app=a1")
)

// sameNodeCluster is the scale cluster with sameNodePair's two
// NetworkPolicies: app=a0 of ns0 may reach app=a1 on TCP 8080 only.
func sameNodeCluster() *policy.Cluster {
	cl := policy.ScaleCluster(10, 20, 100, []string{"node1", "node2"})
	port := []model.PolicyPort{{Proto: model.TCP, Port: 8080}}
	out, in := model.PolicyID{Namespace: "ns0", Name: "out"}, model.PolicyID{Namespace: "ns0", Name: "in"}
	cl.SetPolicy(out, &model.Policy{ID: out, Pods: a0, IsolatesEgress: true, Egress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: a1}}, Ports: port}}})
	cl.SetPolicy(in, &model.Policy{ID: in, Pods: a1, IsolatesIngress: true, Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: a0}}, Ports: port}}})
	return cl
}

// withTiers are sameNodeCluster's tables with 100 Admin-tier and 100
// Baseline-tier ClusterNetworkPolicies selecting both pods, as `netcube-lab
// bench policy --cluster-policies 100` puts them: each names the other
// pod on a port of its own (Pass in the Admin tier, Deny in the
// Baseline), so NetworkPolicy still decides TCP 8080 and 8081.
func withTiers(t *testing.T, server netip.Addr) *policy.Tables {
	t.Helper()
	cl := sameNodeCluster()
	both, _ := labels.Parse("app in (a0,a1)")
	for k := range 200 {
		tier, action := model.AdminTier, model.Pass
		if k%2 == 1 {
			tier, action = model.BaselineTier, model.Deny
		}
		ports := []model.PolicyPort{{Proto: model.TCP, Port: uint16(9000 + k)}}
		name := fmt.Sprintf("cnp-%03d", k)
		cl.SetClusterPolicy(name, &model.ClusterPolicy{Name: name, Tier: tier, Priority: int32(k), Namespaces: labels.Everything(), Pods: both,
			Ingress: []model.ClusterRule{{Action: action, Peers: []model.PolicyPeer{{Namespaces: labels.Everything(), Pods: a0}}, Ports: ports}},
			Egress:  []model.ClusterRule{{Action: action, Peers: []model.PolicyPeer{{Namespaces: labels.Everything(), Pods: a1}}, Ports: ports}}})
	}
	tb := policy.NewCompiler().Compile(cl, func(p *model.Pod) bool { return p.Node == "node1" }, nil)
	if len(tb.Verdicts) == 0 {
		t.Fatal("no tier set entries: the ClusterNetworkPolicies select neither pod, the figure would not be the one printed")
	}
	if _, ok := tb.Endpoints[server]; !ok {
		t.Fatal("the receiver is not a policy endpoint of node1")
	}
	return tb
}

// eventDrain returns a function that reads every event waiting in dp's
// ring buffer. The agent reads the ring buffer as it fills (an event wakes
// it once 64 KiB wait, bpf/cubes/monitor): the cost tests' blocks of
// events stay under that, and are read between blocks.
func eventDrain(t *testing.T, dp *datapath.Datapath) func() {
	t.Helper()
	km, ok := dp.Maps().Map(monitor.MapEvents).(interface{ Unwrap() *ebpf.Map })
	if !ok {
		t.Fatal("the events map is not the kernel's")
	}
	rd, err := ringbuf.NewReader(km.Unwrap())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	return func() {
		rd.SetDeadline(time.Now().Add(20 * time.Millisecond))
		for {
			if _, err := rd.Read(); err != nil {
				return
			}
		}
	}
}
