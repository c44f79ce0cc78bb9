package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestMasquerade: a pod's packet to outside the cluster leaves with the
// node's address and a SNAT port, the same for the flow's later packets,
// one hop less (a router's hop: traceroute counts it);
// the answer comes back to the pod (translated, then into it); inside the
// cluster, or with masquerading off, nothing is translated.
func TestMasquerade(t *testing.T) {
	dp := masqSetup(t)
	maps := dp.Maps()
	server4 := netip.MustParseAddrPort("192.0.2.1:443")
	server6 := netip.MustParseAddrPort("[2001:db8::1]:443")

	// Positive control: inside the cluster, untouched.
	run(t, dp, step{name: "pod -> another node's pod", in: pkt.TCP(client4, pod4, syn, nil), verdict: actOK})

	for _, c := range []struct {
		client, server netip.AddrPort
		node           netip.Addr
	}{{client4, server4, node4}, {client6, server6, node6}} {
		out := make([]byte, 1600)
		in := pkt.TCP(c.client, c.server, syn, nil)
		opts := runOpts(in, out)
		if _, err := dp.Programs().FromPod.Run(opts); err != nil {
			t.Fatal(err)
		}
		src, dst := pkt.Endpoints(opts.DataOut)
		if src.Addr() != c.node || src.Port() < 61000 || dst != c.server {
			t.Fatalf("%s -> %s masqueraded as %s -> %s, want %s:61000+", c.client, c.server, src, dst, c.node)
		}
		if want := pkt.Hop(pkt.Rewrite(in, src, c.server)); string(opts.DataOut) != string(want) {
			t.Errorf("masqueraded SYN: bytes differ (checksums?)")
		}
		// Later packets of the flow keep the port.
		data := pkt.TCP(c.client, c.server, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("hello"))
		run(t, dp, step{name: "data of the flow", in: data, verdict: actOK, out: pkt.Hop(pkt.Rewrite(data, src, c.server))})

		// The answer, on the uplink, comes back to the pod.
		answer := pkt.TCP(c.server, src, synAck, nil)
		// The pod is on this node (router_endpoints): straight in.
		run(t, dp, step{name: "answer to the node's port", fromNet: true, in: answer, verdict: actRedirect,
			out: withMACs(pkt.Rewrite(answer, c.server, c.client), podMAC, hostMAC)})
	}

	// A connection opened from outside to the pod's own address (routed to
	// this node): its replies leave from that address, untranslated, or
	// the client would drop them. (The SYNs above, the positive control,
	// were masqueraded.)
	outside := netip.MustParseAddrPort("192.0.2.7:50000")
	reply := pkt.TCP(client4, outside, synAck, nil)
	run(t, dp, step{name: "reply to a client outside", in: reply, verdict: actOK, out: reply})

	// Masquerading off: ::/0 holds every destination.
	if err := cube.Put(maps, nat.MapNoMasq, datapath.PrefixFrom(netip.MustParsePrefix("::/0")), uint8(1)); err != nil {
		t.Fatal(err)
	}
	other := netip.MustParseAddrPort("10.244.1.11:40001")
	run(t, dp, step{name: "masquerading off", in: pkt.TCP(other, server4, syn, nil), verdict: actOK})
}
