package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// loadMode is load with a NodePort mode (lb.NodePortSNAT, _DSR, _Hybrid).
func loadMode(t *testing.T, mode string) (*datapath.Datapath, *lb.Tables) {
	t.Helper()
	testenv.RequireRoot(t)
	vars, err := lb.NodePortVariables(mode, "native")
	if err != nil {
		t.Fatal(err)
	}
	dp, err := loadTrusting(datapath.Config{MapSizes: map[string]uint32{
		"lb_services": 1024, "lb_backends": 1024, "lb_revnat": 1024, "ct_flows": 65536,
	}, Variables: vars})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := nat.SetNodeAddrs(dp.Maps(), node4, node6); err != nil {
		t.Fatal(err)
	}
	return dp, lb.New(dp.Maps())
}

// TestDSRPacketFlows: direct server return, packet in and out, on both
// nodes of a flow from outside to a NodePort whose endpoint is a pod of
// the other node. The frontend's node DNATs the SYN but keeps the client
// as its source, writes the frontend in (an IPv4 option, an IPv6
// destination options header) and lowers the SYN's MSS by as much; the
// flow's later TCP packets go DNATed alone. The backend's node hands the
// packet to the pod as it came, keeping the frontend, and the pod's reply
// leaves from the frontend straight to the client. XDP sends the same
// bytes as tc. Hybrid SNATs UDP (the control: the same datagram DSR
// carries in dsr mode).
func TestDSRPacketFlows(t *testing.T) {
	ext := model.External
	const mss = 1460
	fwd := pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}
	for _, c := range []struct {
		family     string
		client, np netip.AddrPort
		backend    netip.AddrPort
		overhead   uint16
	}{
		{"IPv4", ext4, np4, be4, 8},
		{"IPv6", ext6, np6, be6, 24},
	} {
		t.Run(c.family, func(t *testing.T) {
			syn := pkt.SYNWithMSS(c.client, c.np, mss)
			onWire := pkt.WithDSR(pkt.WithMSS(pkt.Rewrite(syn, c.client, c.backend), mss-c.overhead), c.np)
			ack := pkt.TCP(c.client, c.np, fwd, []byte("GET /"))
			udp := pkt.UDP(c.client, netip.AddrPortFrom(c.np.Addr(), c.np.Port()+1), []byte("q"))
			udpWire := pkt.WithDSR(pkt.Rewrite(udp, c.client, netip.AddrPortFrom(c.backend.Addr(), c.backend.Port()+1)),
				netip.AddrPortFrom(c.np.Addr(), c.np.Port()+1))
			services := []model.FrontendBackends{
				{Frontend: frontend(c.np, model.TCP), Flags: ext, Backends: backends(c.backend)},
				{Frontend: frontend(netip.AddrPortFrom(c.np.Addr(), c.np.Port()+1), model.UDP), Flags: ext,
					Backends: backends(netip.AddrPortFrom(c.backend.Addr(), c.backend.Port()+1))},
			}

			// The frontend's node, tc.
			front, tables := loadMode(t, lb.NodePortDSR)
			for _, fb := range services {
				if err := tables.Apply(fb); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range []step{
				{name: "SYN: DNAT, the client kept, the frontend written in, MSS lowered", fromNet: true, in: syn, verdict: actOK, out: onWire},
				{name: "data: DNAT alone", fromNet: true, in: ack, verdict: actOK, out: pkt.Rewrite(ack, c.client, c.backend)},
				{name: "UDP: each datagram carries the frontend", fromNet: true, in: udp, verdict: actOK, out: udpWire},
			} {
				run(t, front, s)
			}

			// The backend's node: into the pod as it came; the reply
			// from the frontend, to the client.
			back, _ := loadMode(t, lb.NodePortDSR)
			endpoint(t, back, c.backend.Addr(), 7)
			reply := pkt.TCP(c.backend, c.client, synAck, nil)
			run(t, back, step{name: "backend's node: the pod's reply, before any DSR packet, is not translated (control)", in: reply, verdict: actOK})
			run(t, back, step{name: "backend's node: a DSR SYN from a sender that is no node: dropped", fromNet: true, in: onWire, verdict: actShot})
			run(t, back, step{name: "backend's node: the pod's reply after it is still not translated", in: reply, verdict: actOK})
			nodeMAC(t, back, onWire[6:12])
			for _, s := range []step{
				{name: "backend's node: the SYN into the pod, from a node", fromNet: true, in: onWire, verdict: actRedirect, out: withMACs(onWire, podMAC, hostMAC)},
				{name: "backend's node: the pod's reply leaves from the frontend", in: reply, verdict: actOK, out: pkt.TCP(c.np, c.client, synAck, nil)},
			} {
				run(t, back, s)
			}

			// The frontend's node, XDP: the same bytes, addressed to the
			// next hop.
			ns, ifindex := xdpUplink(t)
			xfront, xtables := loadMode(t, lb.NodePortDSR)
			for _, fb := range services {
				if err := xtables.Apply(fb); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range []xdpStep{
				{name: "XDP: SYN", in: syn, verdict: xdpTx, out: withMACs(onWire, nextHopMAC, uplinkMAC)},
				{name: "XDP: data", in: ack, verdict: xdpTx, out: withMACs(pkt.Rewrite(ack, c.client, c.backend), nextHopMAC, uplinkMAC)},
				{name: "XDP: UDP", in: udp, verdict: xdpTx, out: withMACs(udpWire, nextHopMAC, uplinkMAC)},
			} {
				runXDP(t, xfront, ns, ifindex, s)
			}

			// Hybrid: TCP by DSR, UDP SNATed.
			hybrid, htables := loadMode(t, lb.NodePortHybrid)
			for _, fb := range services {
				if err := htables.Apply(fb); err != nil {
					t.Fatal(err)
				}
			}
			node := node4
			if c.client.Addr().Is6() {
				node = node6
			}
			for _, s := range []step{
				{name: "hybrid: TCP by DSR", fromNet: true, in: syn, verdict: actOK, out: onWire},
				{name: "hybrid: UDP SNATed", fromNet: true, in: udp, verdict: actOK,
					out: pkt.Rewrite(udp, netip.AddrPortFrom(node, c.client.Port()), netip.AddrPortFrom(c.backend.Addr(), c.backend.Port()+1))},
			} {
				run(t, hybrid, s)
			}
		})
	}
}

// nodeMAC registers mac as another node's (router_node_macs), as the
// router cube does from the neighbour table.
func nodeMAC(t *testing.T, dp *datapath.Datapath, mac []byte) {
	t.Helper()
	var k datapath.RouterMac
	copy(k.Addr[:], mac)
	if err := cube.Put(dp.Maps(), router.MapNodeMACs, k, uint8(1)); err != nil {
		t.Fatal(err)
	}
}

// TestDSROptionIsTrustedOnlyFromNodesWithDSROn: a packet carrying a DSR
// frontend is honoured only with --nodeport-mode dsr or hybrid and from
// another node's MAC (TestDSRPacketFlows: from a sender that is no node).
// Each refusal follows its positive control.
func TestDSROptionIsTrustedOnlyFromNodesWithDSROn(t *testing.T) {
	synIn := pkt.SYNWithMSS(ext4, np4, 1460)
	onWire := pkt.WithDSR(pkt.WithMSS(pkt.Rewrite(synIn, ext4, be4), 1452), np4)
	forged := pkt.WithDSR(pkt.WithMSS(pkt.Rewrite(synIn, ext4, be4), 1452), netip.MustParseAddrPort("198.51.100.7:443"))

	// SNAT mode: never, even from a node.
	snat, _ := loadMode(t, lb.NodePortSNAT)
	endpoint(t, snat, be4.Addr(), 7)
	nodeMAC(t, snat, onWire[6:12])
	run(t, snat, step{name: "snat: a plain SYN from outside into the pod (control)", fromNet: true, in: pkt.Rewrite(synIn, ext4, be4), verdict: actRedirect,
		out: withMACs(pkt.Rewrite(synIn, ext4, be4), podMAC, hostMAC)})
	before := drops(t, snat)[datapath.MonDropDSRUntrusted]
	run(t, snat, step{name: "snat: a DSR SYN from a node: dropped", fromNet: true, in: forged, verdict: actShot})
	if n := drops(t, snat)[datapath.MonDropDSRUntrusted] - before; n != 1 {
		t.Errorf("snat: dsr-untrusted drops +%d, want 1", n)
	}
	run(t, snat, step{name: "snat: the pod's reply is not sent from the forged frontend", in: pkt.TCP(be4, ext4, synAck, nil), verdict: actOK})

}
