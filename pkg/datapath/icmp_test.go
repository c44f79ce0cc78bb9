package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// icmpStats reads nat_icmp_stats, summed over the CPUs.
func icmpStats(t *testing.T, dp *datapath.Datapath) map[datapath.NatIcmpStat]uint64 {
	t.Helper()
	out := map[datapath.NatIcmpStat]uint64{}
	for s := datapath.NatIcmpStat(0); s < datapath.NatIcmpStatMax; s++ {
		var perCPU []uint64
		if err := dp.Maps().Map(nat.MapICMPStats).Lookup(uint32(s), &perCPU); err != nil {
			t.Fatal(err)
		}
		for _, v := range perCPU {
			out[s] += v
		}
	}
	return out
}

// masqSetup is TestMasquerade's node: its addresses, the cluster's ranges
// not masqueraded, and the client pods of this node.
func masqSetup(t *testing.T) *datapath.Datapath {
	dp, _ := load(t)
	maps := dp.Maps()
	if err := nat.SetNodeAddrs(maps, node4, node6); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"10.244.0.0/16", "fd00:10:244::/48"} {
		if err := cube.Put(maps, nat.MapNoMasq, datapath.PrefixFrom(netip.MustParsePrefix(p)), uint8(1)); err != nil {
			t.Fatal(err)
		}
	}
	endpoint(t, dp, client4.Addr(), 8)
	endpoint(t, dp, client6.Addr(), 9)
	return dp
}

// sent runs a pod's packet through from_pod and returns it as it left.
func sent(t *testing.T, dp *datapath.Datapath, in []byte) []byte {
	t.Helper()
	out := make([]byte, 1600)
	opts := runOpts(in, out)
	if _, err := dp.Programs().FromPod.Run(opts); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), opts.DataOut...)
}

// TestICMPEchoMasquerade: a pod's ping to outside the cluster leaves with
// the node's address and an identifier held in conntrack (another pod's
// same identifier gets another), one hop less; the replies come back to
// each pod with its own identifier; a reply to an identifier no flow holds
// passes untouched; a ping whose TTL ends here is the kernel's to answer.
func TestICMPEchoMasquerade(t *testing.T) {
	for _, fam := range []struct {
		name           string
		pod, other     netip.Addr // pods of this node; other is no endpoint (its replies go to the kernel)
		cluster        netip.Addr // another node's pod
		server, router netip.Addr
		node           netip.Addr
	}{
		{"IPv4", client4.Addr(), netip.MustParseAddr("10.244.1.12"), pod4.Addr(), netip.MustParseAddr("192.0.2.1"),
			netip.MustParseAddr("198.51.100.1"), node4},
		{"IPv6", client6.Addr(), netip.MustParseAddr("fd00:10:244:1::12"), netip.MustParseAddr("fd00:10:244:2::22"),
			netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:ff::1"), node6},
	} {
		t.Run(fam.name, func(t *testing.T) {
			dp := masqSetup(t)
			payload := []byte("abcdefgh")
			// Positive control first: inside the cluster nothing changes.
			inside := pkt.Echo(fam.pod, fam.cluster, 7, 1, false, payload)
			run(t, dp, step{name: "echo to another node's pod", in: inside, verdict: actOK})

			req := pkt.Echo(fam.pod, fam.server, 7, 1, false, payload)
			out := sent(t, dp, req)
			src, dst, natID := pkt.EchoOf(out)
			if src != fam.node || dst != fam.server || natID == 7 {
				t.Fatalf("echo %s -> %s id 7 left as %s -> %s id %d, want from %s with another id", fam.pod, fam.server, src, dst, natID, fam.node)
			}
			if want := pkt.Hop(pkt.Echo(fam.node, fam.server, natID, 1, false, payload)); string(out) != string(want) {
				t.Errorf("masqueraded echo: bytes differ (checksum, TTL?)\n got %x\nwant %x", out, want)
			}
			// The flow's next request keeps its identifier.
			req2 := pkt.Echo(fam.pod, fam.server, 7, 2, false, payload)
			run(t, dp, step{name: "second request", in: req2, verdict: actOK,
				out: pkt.Hop(pkt.Echo(fam.node, fam.server, natID, 2, false, payload))})

			// Another pod's flow whose identifier is the one taken.
			taken := pkt.Echo(fam.other, fam.server, natID, 1, false, payload)
			_, _, otherID := pkt.EchoOf(sent(t, dp, taken))
			if otherID == natID {
				t.Fatalf("two pods' echoes share identifier %d on the node", natID)
			}

			// The replies, on the uplink.
			reply := pkt.Echo(fam.server, fam.node, natID, 1, true, payload)
			run(t, dp, step{name: "reply to the pod", fromNet: true, in: reply, verdict: actRedirect,
				out: withMACs(pkt.Echo(fam.server, fam.pod, 7, 1, true, payload), podMAC, hostMAC)})
			otherReply := pkt.Echo(fam.server, fam.node, otherID, 1, true, payload)
			run(t, dp, step{name: "reply to the other pod", fromNet: true, in: otherReply, verdict: actOK,
				out: pkt.Echo(fam.server, fam.other, natID, 1, true, payload)})
			stray := pkt.Echo(fam.server, fam.node, natID^0x5555, 1, true, payload)
			run(t, dp, step{name: "reply to an identifier no flow holds", fromNet: true, in: stray, verdict: actOK})

			// TTL 1: not translated, the kernel answers time exceeded.
			last := pkt.WithTTL(pkt.Echo(fam.pod, fam.server, 9, 1, false, payload), 1)
			run(t, dp, step{name: "TTL 1", in: last, verdict: actOK})
		})
	}
}

// TestICMPErrorsOfMasqueradedFlows: the errors that answer a pod's
// masqueraded flow (to the node's address, on the uplink) go back to the
// pod, the quoted packet's source and port translated back: fragmentation
// needed / packet too big with its MTU, time exceeded with the shortest
// quote a router may send, port unreachable from the server, time
// exceeded about a ping. An error quoting too little, or a packet of a
// flow netcube never translated, passes untouched and is counted.
func TestICMPErrorsOfMasqueradedFlows(t *testing.T) {
	for _, fam := range []struct {
		name           string
		pod            netip.AddrPort
		server, router netip.Addr
		node           netip.Addr
		hdr            int // IP header length: the shortest quote is hdr + 8
	}{
		{"IPv4", client4, netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.1"), node4, 20},
		{"IPv6", client6, netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8:ff::1"), node6, 40},
	} {
		t.Run(fam.name, func(t *testing.T) {
			dp := masqSetup(t)
			server := netip.AddrPortFrom(fam.server, 53)
			big := make([]byte, 1400)
			out := sent(t, dp, pkt.UDP(fam.pod, server, big))
			natSrc, _ := pkt.Endpoints(out)
			if natSrc.Addr() != fam.node {
				t.Fatalf("UDP not masqueraded: left from %s", natSrc)
			}
			ping := sent(t, dp, pkt.Echo(fam.pod.Addr(), fam.server, 7, 1, false, nil))
			if _, _, id := pkt.EchoOf(ping); id == 7 {
				t.Fatalf("echo not masqueraded: %x", ping)
			}
			podPing := netip.AddrPortFrom(fam.pod.Addr(), 7)
			before := icmpStats(t, dp)

			toPod := func(e []byte) []byte { return withMACs(e, podMAC, hostMAC) }
			// What the pod sent, as the pod's socket knows it.
			asSent := pkt.TranslateQuote(out, fam.pod, server)
			pingAsSent := pkt.TranslateQuote(ping, podPing, netip.AddrPortFrom(fam.server, 0))
			for _, c := range []struct {
				name    string
				in      []byte
				verdict uint32
				out     []byte // nil: unchanged
			}{
				{"fragmentation needed, whole quote", pkt.Error(fam.router, fam.node, pkt.FragNeeded, 1280, out, 0), actRedirect,
					toPod(pkt.Error(fam.router, fam.pod.Addr(), pkt.FragNeeded, 1280, asSent, 0))},
				{"time exceeded, the shortest quote", pkt.Error(fam.router, fam.node, pkt.TimeExceeded, 0, out, fam.hdr+8), actRedirect,
					toPod(pkt.Error(fam.router, fam.pod.Addr(), pkt.TimeExceeded, 0, asSent, fam.hdr+8))},
				{"port unreachable from the server", pkt.Error(fam.server, fam.node, pkt.PortUnreach, 0, out, 0), actRedirect,
					toPod(pkt.Error(fam.server, fam.pod.Addr(), pkt.PortUnreach, 0, asSent, 0))},
				{"time exceeded about a ping", pkt.Error(fam.router, fam.node, pkt.TimeExceeded, 0, ping, 0), actRedirect,
					toPod(pkt.Error(fam.router, fam.pod.Addr(), pkt.TimeExceeded, 0, pingAsSent, 0))},
				{"quote shorter than the ports", pkt.Error(fam.router, fam.node, pkt.TimeExceeded, 0, out, fam.hdr+3), actOK, nil},
				{"quote of the IP header only", pkt.Error(fam.router, fam.node, pkt.FragNeeded, 1280, out, fam.hdr), actOK, nil},
				{"a flow netcube never saw", pkt.Error(fam.router, fam.node, pkt.TimeExceeded, 0,
					pkt.UDP(netip.AddrPortFrom(fam.node, 33434), server, nil), 0), actOK, nil},
				{"the flow's port, from another address", pkt.Error(fam.router, fam.node, pkt.TimeExceeded, 0,
					pkt.UDP(netip.AddrPortFrom(fam.router, natSrc.Port()), server, nil), 0), actOK, nil},
			} {
				run(t, dp, step{name: c.name, fromNet: true, in: c.in, verdict: c.verdict, out: c.out})
			}
			after := icmpStats(t, dp)
			for s, want := range map[datapath.NatIcmpStat]uint64{
				datapath.NatIcmpErrXlated: 4, datapath.NatIcmpErrShort: 2, datapath.NatIcmpErrUntracked: 2, datapath.NatIcmpErrBad: 0,
			} {
				if got := after[s] - before[s]; got != want {
					t.Errorf("nat_icmp_stats[%v]: %d, want %d", s, got, want)
				}
			}
		})
	}
}

// TestICMPErrorsOfServiceFlows: on the tc path a pod's socket knows the
// ClusterIP, not the backend: an error about its flow (quoting pod ->
// backend) is turned into one about the frontend; the backend's own error
// comes from the frontend, a router's keeps the router's address. An error
// about a direct flow to the same backend (no Service) is not touched.
func TestICMPErrorsOfServiceFlows(t *testing.T) {
	for _, fam := range []struct {
		name        string
		client, vip netip.AddrPort
		backend     netip.AddrPort
		router      netip.Addr
		direct      netip.AddrPort // the same pod, another port, straight to the backend
	}{
		{"IPv4", client4, vip4, be4, netip.MustParseAddr("10.244.0.1"), netip.AddrPortFrom(client4.Addr(), 40100)},
		{"IPv6", client6, vip6, be6, netip.MustParseAddr("fd00:10:244::1"), netip.AddrPortFrom(client6.Addr(), 40100)},
	} {
		t.Run(fam.name, func(t *testing.T) {
			dp, tables := load(t)
			if err := tables.Upsert(frontend(fam.vip, model.UDP), backends(fam.backend)); err != nil {
				t.Fatal(err)
			}
			// Positive control: the flow is balanced to the backend.
			q := pkt.UDP(fam.client, fam.vip, []byte("query"))
			toBackend := pkt.Rewrite(q, fam.client, fam.backend)
			run(t, dp, step{name: "to the Service", in: q, verdict: actOK, out: toBackend})
			direct := pkt.UDP(fam.direct, fam.backend, []byte("query"))
			run(t, dp, step{name: "straight to the backend", in: direct, verdict: actOK})

			asSent := pkt.TranslateQuote(toBackend, fam.client, fam.vip)
			for _, c := range []struct {
				name string
				in   []byte
				out  []byte
			}{
				{"port unreachable from the backend",
					pkt.Error(fam.backend.Addr(), fam.client.Addr(), pkt.PortUnreach, 0, toBackend, 0),
					pkt.Error(fam.vip.Addr(), fam.client.Addr(), pkt.PortUnreach, 0, asSent, 0)},
				{"fragmentation needed from a router",
					pkt.Error(fam.router, fam.client.Addr(), pkt.FragNeeded, 1400, toBackend, 0),
					pkt.Error(fam.router, fam.client.Addr(), pkt.FragNeeded, 1400, asSent, 0)},
				{"about a direct flow", pkt.Error(fam.backend.Addr(), fam.client.Addr(), pkt.PortUnreach, 0, direct, 0), nil},
			} {
				run(t, dp, step{name: c.name, toPod: true, in: c.in, verdict: actOK, out: c.out})
			}
		})
	}
}
