package datapath_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

var (
	podMAC  = [6]byte{0x02, 0xaa, 0, 0, 0, 0x01}
	hostMAC = [6]byte{0x02, 0xbb, 0, 0, 0, 0x01}
	vxMAC   = [6]byte{0x02, 0xcc, 0, 0, 0, 0x01}
)

// withMACs is packet with its Ethernet addresses replaced.
func withMACs(packet []byte, dst, src [6]byte) []byte {
	out := append([]byte(nil), packet...)
	copy(out[0:6], dst[:])
	copy(out[6:12], src[:])
	return out
}

func endpoint(t *testing.T, dp *datapath.Datapath, a netip.Addr, ifindex uint32) {
	t.Helper()
	ep := datapath.RouterEndpoint{Ifindex: ifindex, PodMac: podMAC, HostMac: hostMAC}
	if err := cube.Put(dp.Maps(), router.MapEndpoints, datapath.AddrFrom(a), ep); err != nil {
		t.Fatal(err)
	}
	// As the router cube writes both for every pod (router_sources: the
	// pod's own address, on its own device).
	if err := cube.Put(dp.Maps(), router.MapSources, datapath.AddrFrom(a), datapath.RouterSource{Ifindex: ifindex}); err != nil {
		t.Fatal(err)
	}
}

// TestRouterPacketFlows: the router's decisions, packet in and out: a
// packet for a pod of this node is redirected into it with its MACs (a
// Service's, after balancing; a Service reply, translated back first);
// with VXLAN, a packet for another node's pod goes into the overlay; what
// is neither is the kernel's.
func TestRouterPacketFlows(t *testing.T) {
	dp, tables := load(t)
	maps := dp.Maps()
	if err := tables.Upsert(frontend(vip4, model.TCP), backends(be4b)); err != nil {
		t.Fatal(err)
	}
	endpoint(t, dp, be4b.Addr(), 7)
	endpoint(t, dp, client4.Addr(), 8)
	syn4 := pkt.TCP(client4, vip4, syn, nil)
	reply := pkt.TCP(be4b, client4, synAck, nil)
	direct := pkt.TCP(client4, be4b, syn, nil)

	for _, s := range []step{
		{name: "pod -> Service, backend on this node: balanced, then into the backend's pod", in: syn4, verdict: actRedirect,
			out: withMACs(pkt.Rewrite(syn4, client4, be4b), podMAC, hostMAC)},
		{name: "its reply, client on this node: translated back, then into the client's pod", in: reply, verdict: actRedirect,
			out: withMACs(pkt.Rewrite(reply, vip4, client4), podMAC, hostMAC)},
		{name: "pod -> pod of this node: into it, untranslated", in: direct, verdict: actRedirect,
			out: withMACs(direct, podMAC, hostMAC)},
		{name: "pod -> another node's pod, native routing: the kernel's (no route here)", in: pkt.TCP(client4, pod4, syn, nil), verdict: actOK},
		{name: "another node's pod -> a pod of this node, on the uplink: into it", fromNet: true,
			in: pkt.TCP(pod4, be4b, syn, nil), verdict: actRedirect, out: withMACs(pkt.TCP(pod4, be4b, syn, nil), podMAC, hostMAC)},
	} {
		run(t, dp, s)
	}

	// VXLAN: another node's pod CIDR -> the overlay device.
	conf := datapath.RouterConf{Mode: datapath.RouterVXLAN, VxlanIfindex: 1, Vni: router.VNI, VxlanMac: vxMAC}
	if err := cube.Put(maps, router.MapConfig, uint32(0), conf); err != nil {
		t.Fatal(err)
	}
	remote := netip.MustParsePrefix("10.244.2.0/24")
	key := datapath.PrefixFrom(remote)
	if err := cube.Put(maps, router.MapNodes, key, datapath.RouterNode{Underlay: datapath.AddrFrom(netip.MustParseAddr("172.30.0.12"))}); err != nil {
		t.Fatal(err)
	}
	toRemote := pkt.TCP(client4, pod4, syn, nil)
	for _, s := range []step{
		{name: "VXLAN: pod -> another node's pod: into the overlay, addressed to it", in: toRemote, verdict: actRedirect,
			out: withMACs(toRemote, vxMAC, vxMAC)},
		{name: "VXLAN: pod -> this node's pod: still straight in", in: direct, verdict: actRedirect,
			out: withMACs(direct, podMAC, hostMAC)},
		{name: "VXLAN: pod -> outside any pod CIDR: the kernel's", in: pkt.TCP(client4, netip.MustParseAddrPort("192.0.2.1:443"), syn, nil), verdict: actOK},
	} {
		run(t, dp, s)
	}

	// to_overlay: a tunnel's remote end for another node's pods; nothing
	// else may leave through the overlay.
	overlay := dp.Program("to_overlay")
	for _, c := range []struct {
		name    string
		in      []byte
		verdict uint32
	}{
		{"to another node's pod", toRemote, actOK},
		{"to an address no node has", pkt.TCP(client4, netip.MustParseAddrPort("10.244.9.9:80"), syn, nil), actShot},
	} {
		out := make([]byte, 1600)
		verdict, err := overlay.Run(runOpts(c.in, out))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if verdict != c.verdict {
			t.Errorf("to_overlay %s: verdict %d, want %d", c.name, verdict, c.verdict)
		}
	}
}

// TestOverlayLeavesLinkLocalMulticastToTheKernel: what the kernel sends to
// the overlay link itself (an MLD report to ff02::16, 224.0.0.22) has no
// node to tunnel to and is not a pod's: to_overlay passes it to the
// kernel, counting no drop; a unicast packet to no node's pod CIDR (the
// negative control) is dropped as no-route-to-node.
func TestOverlayLeavesLinkLocalMulticastToTheKernel(t *testing.T) {
	dp, _ := load(t)
	overlayTo(t, dp, be4.Addr())
	prog := dp.Program("to_overlay")
	for _, p := range [][]byte{
		pkt.UDP(netip.MustParseAddrPort("[::]:0"), netip.MustParseAddrPort("[ff02::16]:0"), nil),
		pkt.UDP(netip.MustParseAddrPort("10.0.0.1:0"), netip.MustParseAddrPort("224.0.0.22:0"), nil),
	} {
		before := totalDrops(t, dp)
		if v := runProg(t, prog, p); v != actOK {
			t.Errorf("link-local multicast: verdict %d, want the kernel's (%d)", v, actOK)
		}
		if n := totalDrops(t, dp) - before; n != 0 {
			t.Errorf("link-local multicast: %d drops counted", n)
		}
	}
	before := drops(t, dp)[datapath.MonDropNoTunnel]
	if v := runProg(t, prog, pkt.UDP(client4, netip.MustParseAddrPort("10.99.0.1:80"), nil)); v != actShot {
		t.Errorf("unicast to no node: verdict %d, want dropped", v)
	}
	if n := drops(t, dp)[datapath.MonDropNoTunnel]; n != before+1 {
		t.Errorf("no-route-to-node counted %d, want %d", n, before+1)
	}
}

// TestNetkitPodDelivery: a netkit pod's from_pod runs in the pod's transmit
// path (netkit's peer hook), where the kernel allows no redirect into a
// peer; so it hands a packet for a pod of this node to that pod's device,
// marked as admitted (the device's to_pod lets it through), with the same
// MACs and translation a veth pod's from_pod gives it, which (the positive
// control) redirects straight into the pod with no mark. to_pod_netkit lets
// the marked packet through and clears the mark, as a veth's crossing of
// namespaces would. A packet the router does not hand to a pod leaves
// unmarked either way.
func TestNetkitPodDelivery(t *testing.T) {
	dp, tables := load(t)
	if p := dp.Programs().FromPodNetkit; p != nil {
		t.Fatalf("the netkit programs loaded with the object, before any netkit pod")
	}
	// Loaded on demand, after the maps are written: they share them.
	if err := tables.Upsert(frontend(vip4, model.TCP), backends(be4b)); err != nil {
		t.Fatal(err)
	}
	endpoint(t, dp, be4b.Addr(), 7)
	endpoint(t, dp, client4.Addr(), 8)
	if err := dp.LoadNetkitPrograms(); err != nil {
		t.Fatal(err)
	}
	syn4 := pkt.TCP(client4, vip4, syn, nil)
	reply := pkt.TCP(be4b, client4, synAck, nil)
	direct := pkt.TCP(client4, be4b, syn, nil)
	progs := dp.Programs()
	for _, c := range []struct {
		name    string
		in, out []byte // out nil: unchanged
		verdict uint32
	}{
		{"pod -> Service, backend on this node", syn4, withMACs(pkt.Rewrite(syn4, client4, be4b), podMAC, hostMAC), actRedirect},
		{"its reply, translated back", reply, withMACs(pkt.Rewrite(reply, vip4, client4), podMAC, hostMAC), actRedirect},
		{"pod -> pod of this node", direct, withMACs(direct, podMAC, hostMAC), actRedirect},
		{"pod -> outside the cluster: the kernel's", pkt.TCP(client4, pod4, syn, nil), nil, actOK},
	} {
		want := c.out
		if want == nil {
			want = c.in
		}
		for _, p := range []struct {
			name string
			prog *ebpf.Program
		}{{"from_pod", progs.FromPod}, {"from_pod_netkit", progs.FromPodNetkit}} {
			v, out, ctx := runCtx(t, p.prog, c.in)
			if v != c.verdict || !bytes.Equal(out, want) {
				t.Errorf("%s, %s: verdict %d, packet %x; want %d, %x", c.name, p.name, v, out, c.verdict, want)
			}
			netkit := p.prog == progs.FromPodNetkit && c.verdict == actRedirect
			if (ctx.Mark != 0) != netkit {
				t.Errorf("%s, %s: mark %#x; want one only from a netkit pod to a pod's device", c.name, p.name, ctx.Mark)
			}
			if !netkit {
				continue
			}
			v, got, after := runCtxIn(t, progs.ToPodNetkit, out, skbCtx{Mark: ctx.Mark})
			if v != actOK || after.Mark != 0 || !bytes.Equal(got, out) {
				t.Errorf("%s, then to_pod_netkit: verdict %d, mark %#x, packet changed %v; want it through unchanged, unmarked", c.name, v, after.Mark, !bytes.Equal(got, out))
			}
		}
	}
}
