package policy_test

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

const tcShot = 2

// runProg runs prog on packet in (BPF_PROG_RUN) and returns its verdict.
func runProg(t *testing.T, prog *ebpf.Program, in []byte) uint32 {
	t.Helper()
	v, err := prog.Run(&ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+256)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRepliesPassAndDropsCounted: a connection an isolated pod accepts gets
// its replies out although the pod's egress allows nothing; a connection
// it would open itself is dropped, and the drop counted for the pod with
// its reason; each side's record is its own (a pod on the same node that
// sent the packet does not vouch for the receiver).
func TestRepliesPassAndDropsCounted(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	server := &model.Pod{ID: model.PodID{Namespace: "x", Name: "server"}, Labels: map[string]string{"app": "server"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244:1::5")}}
	client := &model.Pod{ID: model.PodID{Namespace: "x", Name: "client"}, Labels: map[string]string{"app": "client"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.6"), netip.MustParseAddr("fd00:10:244:1::6")}}
	cl := policy.NewCluster()
	cl.SetPod(server.ID, server)
	cl.SetPod(client.ID, client)
	comp := policy.NewCompiler()
	var have *policy.Tables
	apply := func() {
		t.Helper()
		want := comp.Compile(cl, func(*model.Pod) bool { return true }, nil)
		if err := policy.Sync(dp.Maps(), have, want); err != nil {
			t.Fatal(err)
		}
		have = want
	}
	run := func(prog *ebpf.Program, in []byte) uint32 { t.Helper(); return runProg(t, prog, in) }
	progs := dp.Programs()
	for i, fam := range []int{0, 1} {
		c := netip.AddrPortFrom(client.IPs[fam], uint16(40000+i))
		s := netip.AddrPortFrom(server.IPs[fam], 8080)
		syn := pkt.TCP(c, s, pkt.TCPOpts{SYN: true, Seq: 1}, nil)
		synAck := pkt.TCP(s, c, pkt.TCPOpts{SYN: true, ACK: true, Seq: 9, Ack: 2}, nil)
		back := pkt.TCP(netip.AddrPortFrom(server.IPs[fam], uint16(50000+i)), netip.AddrPortFrom(client.IPs[fam], 22), pkt.TCPOpts{SYN: true}, nil)

		// Positive control: no policy, the server may open connections.
		apply()
		if run(progs.FromPod, back) == tcShot {
			t.Fatal("no policy: the server's own connection dropped")
		}
		// The server accepts app=client on 8080 and may send nothing.
		sel, _ := labels.Parse("app=server")
		peer, _ := labels.Parse("app=client")
		p := &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "server"}, Pods: sel, IsolatesIngress: true, IsolatesEgress: true,
			Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: peer}}, Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8080}}}}}
		cl.SetPolicy(p.ID, p)
		apply()
		if run(progs.FromPod, syn) == tcShot || run(progs.ToPod, syn) == tcShot {
			t.Fatal("the client's SYN to the server dropped; the policy allows it")
		}
		if run(progs.FromPod, synAck) == tcShot {
			t.Error("the server's SYN-ACK dropped: a reply of an accepted connection must pass")
		}
		if run(progs.FromPod, back) != tcShot {
			t.Error("the server opened a connection its egress (nothing allowed) forbids")
		}
		cl.SetPolicy(p.ID, nil)
	}
	var egressDrops uint64
	err = cube.Each(dp.Maps(), policy.MapDrops, func(k datapath.PolicyDropKey, v []uint64) bool {
		if k.Reason == datapath.DropEgress {
			for _, n := range v {
				egressDrops += n
			}
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if egressDrops != 2 {
		t.Errorf("egress drops counted: %d, want 2 (one per family)", egressDrops)
	}
}

// TestUnreadablePortsFailClosed: a packet whose ports the datapath cannot
// read (an IPv6 extension header, a later fragment whose first
// fragment was not seen) is judged by an isolated pod's policy as a packet
// to port 0: a rule naming ports does not let it in or out, a rule
// without ports does; a pod no policy isolates gets it as before (the
// positive control). The kernel's MLD report of an isolated pod (a
// hop-by-hop header, to ff02::16) still leaves.
func TestUnreadablePortsFailClosed(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	server := &model.Pod{ID: model.PodID{Namespace: "x", Name: "server"}, Labels: map[string]string{"app": "server"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fd00:10:244:1::5")}}
	client := &model.Pod{ID: model.PodID{Namespace: "x", Name: "client"}, Labels: map[string]string{"app": "client"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.6"), netip.MustParseAddr("fd00:10:244:1::6")}}
	cl := policy.NewCluster()
	cl.SetPod(server.ID, server)
	cl.SetPod(client.ID, client)
	comp := policy.NewCompiler()
	var have *policy.Tables
	setPolicy := func(ports []model.PolicyPort) {
		t.Helper()
		sel, _ := labels.Parse("app=server")
		peer, _ := labels.Parse("app=client")
		id := model.PolicyID{Namespace: "x", Name: "server"}
		if ports == nil {
			cl.SetPolicy(id, nil)
		} else {
			rule := []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: peer}}, Ports: ports}}
			cl.SetPolicy(id, &model.Policy{ID: id, Pods: sel, IsolatesIngress: true, IsolatesEgress: true, Ingress: rule, Egress: rule})
		}
		want := comp.Compile(cl, func(*model.Pod) bool { return true }, nil)
		if err := policy.Sync(dp.Maps(), have, want); err != nil {
			t.Fatal(err)
		}
		have = want
	}
	run := func(prog *ebpf.Program, in []byte) uint32 { t.Helper(); return runProg(t, prog, in) }
	progs := dp.Programs()
	c6 := netip.AddrPortFrom(client.IPs[1], 40000)
	s6 := netip.AddrPortFrom(server.IPs[1], 8080)
	c4 := netip.AddrPortFrom(client.IPs[0], 40001)
	s4 := netip.AddrPortFrom(server.IPs[0], 8080)
	payload := []byte("sixteen bytes..!")
	cases := []struct {
		name string
		prog *ebpf.Program
		in   []byte
	}{
		{"to the server with a destination options header", progs.ToPod, pkt.WithExtHeader(pkt.UDP(c6, s6, payload), 60)},
		// A hop-by-hop header this way: a connection the server allowed
		// in (the first case, allowed by the rule without ports) is
		// recorded, and its reply would pass whatever the rules.
		{"from the server with a hop-by-hop header", progs.FromPod, pkt.WithExtHeader(pkt.UDP(s6, c6, payload), 0)},
		{"to the server, a later IPv4 fragment of an unseen datagram", progs.ToPod, pkt.Fragments(pkt.UDP(c4, s4, payload), 8, 41)[1]},
		{"to the server, a later IPv6 fragment of an unseen datagram", progs.ToPod, pkt.Fragments(pkt.UDP(c6, s6, payload), 8, 42)[1]},
	}
	for _, c := range cases {
		setPolicy(nil)
		if v := run(c.prog, c.in); v == tcShot {
			t.Errorf("%s, no policy: dropped", c.name)
		}
		setPolicy([]model.PolicyPort{{Proto: model.UDP, Port: 8080}})
		if v := run(c.prog, c.in); v != tcShot {
			t.Errorf("%s, only UDP 8080 allowed: verdict %d, want dropped (its port cannot be read)", c.name, v)
		}
		setPolicy([]model.PolicyPort{})
		if v := run(c.prog, c.in); v == tcShot {
			t.Errorf("%s, every port and protocol of the client allowed: dropped", c.name)
		}
	}
	setPolicy([]model.PolicyPort{{Proto: model.UDP, Port: 8080}})
	mld := pkt.WithExtHeader(pkt.Echo(server.IPs[1], netip.MustParseAddr("ff02::16"), 1, 1, false, nil), 0)
	if v := run(progs.FromPod, mld); v == tcShot {
		t.Error("an isolated pod's hop-by-hop packet to ff02::16 (MLD) dropped")
	}
}

// TestVerdictInConntrack: a connection policy allowed is a conntrack
// entry holding its verdict and the rules' revision.
//   - An idle allowed connection keeps its record through ten times the
//     table's size of other connections opened and closed (an LRU table
//     of records would have evicted it): its reply still passes a pod
//     whose egress allows nothing.
//   - A policy change that still allows it leaves it passing; one that
//     revokes it cuts its next packet, either way.
func TestVerdictInConntrack(t *testing.T) {
	testenv.RequireRoot(t)
	const table = 256
	dp, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{ct.MapFlows: table, ct.MapAcct: table}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	server := &model.Pod{ID: model.PodID{Namespace: "x", Name: "server"}, Labels: map[string]string{"app": "server"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.5")}}
	client := &model.Pod{ID: model.PodID{Namespace: "x", Name: "client"}, Labels: map[string]string{"app": "client"},
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.6")}}
	cl := policy.NewCluster()
	cl.SetPod(server.ID, server)
	cl.SetPod(client.ID, client)
	comp := policy.NewCompiler()
	// The server accepts app=client on the given ports and may send
	// nothing of its own.
	setPolicy := func(ports ...uint16) {
		t.Helper()
		sel, _ := labels.Parse("app=server")
		peer, _ := labels.Parse("app=client")
		p := &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "server"}, Pods: sel, IsolatesIngress: true, IsolatesEgress: true}
		rule := model.PolicyRule{Peers: []model.PolicyPeer{{Pods: peer}}}
		for _, port := range ports {
			rule.Ports = append(rule.Ports, model.PolicyPort{Proto: model.TCP, Port: port})
		}
		p.Ingress = []model.PolicyRule{rule}
		cl.SetPolicy(p.ID, p)
		if comp.Tables() == nil {
			comp.Compile(cl, func(*model.Pod) bool { return true }, nil)
		} else {
			comp.Update(nil, nil, []model.PolicyID{p.ID})
		}
		if err := policy.SyncChanges(dp.Maps(), comp.Tables(), comp.Changes()); err != nil {
			t.Fatal(err)
		}
	}
	progs := dp.Programs()
	run := func(prog *ebpf.Program, in []byte) uint32 { t.Helper(); return runProg(t, prog, in) }
	stats := dp.Maps().Map(ct.MapStats)
	created := func() uint64 { return cube.PerCPUSum(stats, uint32(datapath.CTStatCreated)) }

	setPolicy(8080)
	s := netip.AddrPortFrom(server.IPs[0], 8080)
	idle := netip.AddrPortFrom(client.IPs[0], 40000)
	if run(progs.ToPod, pkt.TCP(idle, s, pkt.TCPOpts{SYN: true, Seq: 1}, nil)) == tcShot {
		t.Fatal("the client's SYN dropped; the policy allows it")
	}
	reply := pkt.TCP(s, idle, pkt.TCPOpts{SYN: true, ACK: true, Seq: 9, Ack: 2}, nil)
	if run(progs.FromPod, reply) == tcShot {
		t.Fatal("the server's SYN-ACK dropped: a reply of an accepted connection must pass")
	}
	stray := pkt.TCP(s, netip.AddrPortFrom(client.IPs[0], 39999), pkt.TCPOpts{ACK: true, Seq: 9, Ack: 2}, nil)
	if run(progs.FromPod, stray) != tcShot {
		t.Fatal("a 'reply' of no connection passed: the server's egress allows nothing, the check below would prove nothing")
	}

	// Churn: ten times the table, each connection opened, answered and
	// reset.
	before := created()
	for i := range 10 * table {
		c := netip.AddrPortFrom(client.IPs[0], uint16(20000+i))
		for _, step := range []struct {
			prog *ebpf.Program
			in   []byte
		}{
			{progs.ToPod, pkt.TCP(c, s, pkt.TCPOpts{SYN: true, Seq: 1}, nil)},
			{progs.FromPod, pkt.TCP(s, c, pkt.TCPOpts{SYN: true, ACK: true, Seq: 9, Ack: 2}, nil)},
			{progs.ToPod, pkt.TCP(c, s, pkt.TCPOpts{RST: true, Seq: 2}, nil)},
		} {
			if run(step.prog, step.in) == tcShot {
				t.Fatalf("churn connection %d dropped", i)
			}
		}
	}
	if n := created() - before; n < 10*table {
		t.Fatalf("the churn wrote %d conntrack entries, want at least %d", n, 10*table)
	}
	if run(progs.FromPod, reply) == tcShot {
		t.Error("after the churn, the idle connection's reply dropped: its record was lost")
	}

	// A change that still allows it: it goes on.
	setPolicy(8080, 9090)
	if run(progs.ToPod, pkt.TCP(idle, s, pkt.TCPOpts{ACK: true, Seq: 2, Ack: 10}, nil)) == tcShot {
		t.Error("a policy change still allowing the connection cut it")
	}
	// A change that revokes it: its next packet is dropped, either way.
	setPolicy(9090)
	if run(progs.ToPod, pkt.TCP(idle, s, pkt.TCPOpts{ACK: true, Seq: 2, Ack: 10}, nil)) != tcShot {
		t.Error("the policy allowing the connection was revoked; its next packet to the server passed")
	}
	if run(progs.FromPod, reply) != tcShot {
		t.Error("the policy allowing the connection was revoked; the server's next packet of it passed")
	}
}

// TestSameNodeOneLookup: a packet between two pods of this node is judged
// for its sender (egress) and its receiver (ingress); the receiver's check
// may pass it on what the sender's found in the connection's conntrack
// entry (policy.h's memo), but only for that packet's connection, under
// the rules it was found under. Each step is a packet through from_pod
// (the sender's check, then the receiver's when from_pod delivers it) or
// to_pod (the receiver's alone, after a from_pod run that handed the
// packet to the kernel left its memo).
func TestSameNodeOneLookup(t *testing.T) {
	testenv.RequireRoot(t)
	// The memo is per CPU, as a program run is: every run of this test on
	// one CPU, so that each finds what the run before it left.
	defer testenv.OnCPU(t, 0)()
	dp, err := loadTrusting(datapath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	pod := func(name, a4, a6 string) *model.Pod {
		return &model.Pod{ID: model.PodID{Namespace: "x", Name: name}, Labels: map[string]string{"app": name},
			IPs: []netip.Addr{netip.MustParseAddr(a4), netip.MustParseAddr(a6)}}
	}
	server, client, other := pod("server", "10.244.1.5", "fd00:10:244:1::5"), pod("client", "10.244.1.6", "fd00:10:244:1::6"),
		pod("other", "10.244.1.7", "fd00:10:244:1::7")
	cl := policy.NewCluster()
	for i, p := range []*model.Pod{server, client, other} {
		cl.SetPod(p.ID, p)
		for _, a := range p.IPs {
			ep := datapath.RouterEndpoint{Ifindex: uint32(100 + i), PodMac: [6]byte{2, 0xaa, 0, 0, 0, byte(i)}, HostMac: [6]byte{2, 0xbb, 0, 0, 0, byte(i)}}
			if err := cube.Put(dp.Maps(), router.MapEndpoints, datapath.AddrFrom(a), ep); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The client may send only to the server's 8080; the server accepts
	// only the client, on port (8080, then 9090: revoked).
	comp := policy.NewCompiler()
	setPolicies := func(port uint16) {
		t.Helper()
		sel := func(s string) labels.Selector { l, _ := labels.Parse(s); return l }
		cl.SetPolicy(model.PolicyID{Namespace: "x", Name: "client"}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "client"},
			Pods: sel("app=client"), IsolatesEgress: true,
			Egress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: sel("app=server")}}, Ports: []model.PolicyPort{{Proto: model.TCP, Port: 8080}}}}})
		cl.SetPolicy(model.PolicyID{Namespace: "x", Name: "server"}, &model.Policy{ID: model.PolicyID{Namespace: "x", Name: "server"},
			Pods: sel("app=server"), IsolatesIngress: true,
			Ingress: []model.PolicyRule{{Peers: []model.PolicyPeer{{Pods: sel("app=client")}}, Ports: []model.PolicyPort{{Proto: model.TCP, Port: port}}}}})
		have := comp.Tables()
		if err := policy.Sync(dp.Maps(), have, comp.Compile(cl, func(*model.Pod) bool { return true }, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// policyEntries counts the connections between two addresses that
	// have a policy record.
	policyEntries := func(a, b netip.Addr) int {
		t.Helper()
		n := 0
		err := cube.Each(dp.Maps(), ct.MapFlows, func(k datapath.CTKey, _ datapath.CTEntry) bool {
			if k.Dir == datapath.CTPolicy && (k.Saddr.IP() == a && k.Daddr.IP() == b || k.Saddr.IP() == b && k.Daddr.IP() == a) {
				n++
			}
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	const actRedirect = 7
	progs := dp.Programs()
	for fam := range 2 {
		setPolicies(8080)
		c := netip.AddrPortFrom(client.IPs[fam], uint16(40000+fam))
		s := netip.AddrPortFrom(server.IPs[fam], 8080)
		o := netip.AddrPortFrom(other.IPs[fam], uint16(41000+fam))
		ack := func(from, to netip.AddrPort) []byte {
			return pkt.TCP(from, to, pkt.TCPOpts{ACK: true, Seq: 2, Ack: 10}, []byte("x"))
		}
		type step struct {
			name   string
			prog   *ebpf.Program
			before func()
			in     []byte
			pass   bool
		}
		delivered := []step{
			{"client SYN -> server: judged both ways, into the server", progs.FromPod, nil, pkt.TCP(c, s, pkt.TCPOpts{SYN: true, Seq: 1}, nil), true},
			{"server SYN-ACK -> client: a reply", progs.FromPod, nil, pkt.TCP(s, c, pkt.TCPOpts{SYN: true, ACK: true, Seq: 9, Ack: 2}, nil), true},
			{"client data -> server: on the entry (the receiver on the memo)", progs.FromPod, nil, ack(c, s), true},
			{"another pod's data -> server: dropped", progs.FromPod, nil, ack(o, s), false},
		}
		// Without the server's route, from_pod hands the client's packets
		// to the kernel (which would bring them to to_pod), memo left.
		unroute := func() {
			for _, a := range server.IPs {
				if err := cube.Remove(dp.Maps(), router.MapEndpoints, datapath.AddrFrom(a)); err != nil {
					t.Fatal(err)
				}
			}
		}
		viaKernel := []step{
			{"client data -> server, to the kernel (positive control for the next steps)", progs.FromPod, unroute, ack(c, s), true},
			{"... then to_pod on the memo it left, rules unchanged: passes", progs.ToPod, nil, ack(c, s), true},
			{"client data -> server, to the kernel, leaves a memo", progs.FromPod, nil, ack(c, s), true},
			{"another pod's data -> server, in to_pod on that memo: dropped (not its connection)", progs.ToPod, nil, ack(o, s), false},
			{"client data -> server, to the kernel, leaves a memo", progs.FromPod, nil, ack(c, s), true},
			{"client RST -> server, in to_pod on the memo a data packet left: passes, judged in full (below: the record is gone)", progs.ToPod,
				nil, pkt.TCP(c, s, pkt.TCPOpts{RST: true, Seq: 2}, nil), true},
		}
		resetThenRevoked := []step{
			{"client data -> server, to the kernel, leaves a memo", progs.FromPod, nil, ack(c, s), true},
			{"... to_pod, rules unchanged: passes (positive control for the next step)", progs.ToPod, nil, ack(c, s), true},
			{"client data -> server, to the kernel, leaves a memo", progs.FromPod, nil, ack(c, s), true},
			{"the server's policy revoked, then to_pod on that memo: dropped (judged under the new rules)", progs.ToPod, func() { setPolicies(9090) }, ack(c, s), false},
		}
		play := func(steps []step) {
			t.Helper()
			for _, step := range steps {
				if step.before != nil {
					step.before()
				}
				v := runProg(t, step.prog, step.in)
				if step.pass && v == tcShot || !step.pass && v != tcShot {
					t.Fatalf("%s: %s: verdict %d, want pass %v", []string{"IPv4", "IPv6"}[fam], step.name, v, step.pass)
				}
			}
		}
		play(delivered)
		before := policyEntries(c.Addr(), s.Addr())
		play(viaKernel)
		if n := policyEntries(c.Addr(), s.Addr()); before != 1 || n != 0 {
			t.Fatalf("%s: the connection's policy records: %d before its RST (want 1), %d after (want 0)", []string{"IPv4", "IPv6"}[fam], before, n)
		}
		// The client's next packet opens the connection again (a packet of
		// no known connection is judged as sent): the server's receiver
		// check records it, and the memo goes on.
		play([]step{{"client SYN -> server again, via to_pod after from_pod", progs.FromPod, nil, pkt.TCP(c, s, pkt.TCPOpts{SYN: true, Seq: 1}, nil), true},
			{"... to_pod", progs.ToPod, nil, pkt.TCP(c, s, pkt.TCPOpts{SYN: true, Seq: 1}, nil), true}})
		play(resetThenRevoked)
		for i, a := range server.IPs { // routed again
			ep := datapath.RouterEndpoint{Ifindex: 100, PodMac: [6]byte{2, 0xaa, 0, 0, 0, byte(i)}, HostMac: [6]byte{2, 0xbb, 0, 0, 0, byte(i)}}
			if err := cube.Put(dp.Maps(), router.MapEndpoints, datapath.AddrFrom(a), ep); err != nil {
				t.Fatal(err)
			}
		}
		// A connection closed between the two pods leaves no record: the
		// sender's check removes it at the last ACK, whose receiver passes
		// on the memo.
		setPolicies(8080)
		c2 := netip.AddrPortFrom(client.IPs[fam], uint16(42000+fam))
		base := policyEntries(c2.Addr(), s.Addr()) // the first connection's
		for _, in := range [][]byte{
			pkt.TCP(c2, s, pkt.TCPOpts{SYN: true, Seq: 1}, nil),
			pkt.TCP(s, c2, pkt.TCPOpts{SYN: true, ACK: true, Seq: 9, Ack: 2}, nil),
			ack(c2, s),
			pkt.TCP(c2, s, pkt.TCPOpts{FIN: true, ACK: true, Seq: 3, Ack: 10}, nil),
			pkt.TCP(s, c2, pkt.TCPOpts{FIN: true, ACK: true, Seq: 10, Ack: 4}, nil),
		} {
			if runProg(t, progs.FromPod, in) != actRedirect {
				t.Fatalf("%s: a packet of the closing connection was not delivered", []string{"IPv4", "IPv6"}[fam])
			}
		}
		if n := policyEntries(c2.Addr(), s.Addr()) - base; n != 1 {
			t.Fatalf("%s: before the last ACK, %d policy entries for the connection, want 1 (the positive control)", []string{"IPv4", "IPv6"}[fam], n)
		}
		if runProg(t, progs.FromPod, pkt.TCP(c2, s, pkt.TCPOpts{ACK: true, Seq: 4, Ack: 11}, nil)) != actRedirect {
			t.Fatal("the connection's last ACK was not delivered")
		}
		if n := policyEntries(c2.Addr(), s.Addr()) - base; n != 0 {
			t.Errorf("%s: after the close, %d policy entries left for the connection, want 0", []string{"IPv4", "IPv6"}[fam], n)
		}
	}
}
