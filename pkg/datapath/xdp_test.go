package datapath_test

import (
	"bytes"
	"encoding/hex"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// XDP verdicts
const (
	xdpDrop = 1
	xdpPass = 2
	xdpTx   = 3
)

// The uplink of the XDP tests' namespace (xdpUplink), with the MAC the
// tables address their frames to (a frame to another MAC is another
// host's, which XDP passes: TestFramesForAnotherHost), and the next hop
// towards the other node's pods (10.244.2.0/24, fd00:10:244:2::/64).
var (
	uplinkMAC  = [6]byte(pkt.HostMAC)
	nextHopMAC = [6]byte{0x02, 0xdd, 0, 0, 0, 0x02}
)

// xdpUplink makes a network namespace holding node 1's uplink (a veth,
// node4/node6 on it) with a route to the other node's pods through a
// neighbour whose MAC is known: what the FIB needs to give XDP a next hop.
// It returns the namespace and the uplink's ifindex there.
func xdpUplink(t *testing.T) (netns.NsHandle, int) {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.Name("nc-xdp")
	ipn := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	mac := func(m [6]byte) string { return net.HardwareAddr(m[:]).String() }
	ipn("link", "add", "up0", "address", mac(uplinkMAC), "type", "veth", "peer", "name", "up1")
	ipn("link", "set", "up0", "up")
	ipn("link", "set", "up1", "up")
	ipn("addr", "add", node4.String()+"/24", "dev", "up0")
	ipn("-6", "addr", "add", node6.String()+"/64", "dev", "up0", "nodad")
	ipn("neigh", "add", "172.30.0.2", "lladdr", mac(nextHopMAC), "dev", "up0", "nud", "permanent")
	ipn("-6", "neigh", "add", "fd00:172:30::2", "lladdr", mac(nextHopMAC), "dev", "up0", "nud", "permanent")
	ipn("route", "add", "10.244.2.0/24", "via", "172.30.0.2")
	ipn("-6", "route", "add", "fd00:10:244:2::/64", "via", "fd00:172:30::2")
	if out, err := exec.Command("ip", "netns", "exec", name, "sysctl", "-q", "-w",
		"net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1").CombinedOutput(); err != nil {
		t.Fatalf("sysctl: %v: %s", err, out)
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	ifc := 0
	inNetns(t, ns, func() {
		i, err := net.InterfaceByName("up0")
		if err != nil {
			t.Fatal(err)
		}
		ifc = i.Index
	})
	return ns, ifc
}

// inNetns runs fn on this goroutine's thread moved into ns: XDP's
// BPF_PROG_RUN finds its ingress device, and the FIB its routes, in the
// caller's namespace.
func inNetns(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("back to the test's namespace: %v", err) // the thread stays locked, and dies with it
			return
		}
		runtime.UnlockOSThread()
	}()
	fn()
}

// xdpStep is a packet through xdp_from_net on the uplink.
type xdpStep struct {
	name    string
	in      []byte
	verdict uint32
	out     []byte // expected frame for XDP_TX; nil: unchanged
	reason  datapath.MonDrop
}

func runXDP(t *testing.T, dp *datapath.Datapath, ns netns.NsHandle, ifindex int, s xdpStep) {
	t.Helper()
	listUplink(t, dp, ifindex, uplinkMAC)
	before := drops(t, dp)
	var verdict uint32
	out := make([]byte, len(s.in)+256)
	opts := &ebpf.RunOptions{Data: s.in, DataOut: out, Context: xdpMD{DataEnd: uint32(len(s.in)), IngressIfindex: uint32(ifindex)}}
	inNetns(t, ns, func() {
		var err error
		if verdict, err = dp.Programs().XDPFromNet.Run(opts); err != nil {
			t.Fatalf("%s: run: %v", s.name, err)
		}
	})
	if verdict != s.verdict {
		t.Errorf("%s: verdict %d, want %d", s.name, verdict, s.verdict)
	}
	after := drops(t, dp)
	for _, d := range []datapath.MonDrop{datapath.MonDropSourceRange, datapath.MonDropNoLocalEndpoint, datapath.MonDropSNATNoPort} {
		want := uint64(0)
		if verdict == xdpDrop && d == s.reason {
			want = 1
		}
		if n := after[d] - before[d]; n != want {
			t.Errorf("%s: %d drops counted as %v, want %d", s.name, n, d, want)
		}
	}
	want := s.out
	if want == nil {
		want = s.in
	}
	if !bytes.Equal(opts.DataOut, want) {
		t.Errorf("%s: output frame differs\n got: %s\nwant: %s", s.name, hex.EncodeToString(opts.DataOut), hex.EncodeToString(want))
	}
}

// listUplink lists the uplink and its MAC in lb_uplinks, as the lb cube
// does for the agent's uplinks (lb.Tables.SetUplinks).
func listUplink(t *testing.T, dp *datapath.Datapath, ifindex int, mac [6]byte) {
	t.Helper()
	if err := cube.Put(dp.Maps(), lb.MapUplinks, uint32(ifindex), datapath.Uplink{Mac: mac}); err != nil {
		t.Fatal(err)
	}
}

// xdpMD is struct xdp_md as BPF_PROG_RUN takes it.
type xdpMD struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

// tx is packet as XDP sends it back out: translated, addressed to the next hop.
func tx(packet []byte, src, dst netip.AddrPort) []byte {
	return withMACs(pkt.Rewrite(packet, src, dst), nextHopMAC, uplinkMAC)
}

// TestXDPPacketFlows: xdp_from_net's packet-flow table. A flow from
// outside to a backend on another node is balanced, DNATed and SNATed and
// sent back out of the uplink (XDP_TX), the same bytes from_net would
// send; its reply passes to tc, which translates it back from the entries
// XDP wrote, and the flow goes on in either program. Sources a frontend
// walls off, and new flows to a Local frontend with no endpoint here, are
// dropped (each after a packet that passes, the positive control).
// Everything XDP does not forward itself passes untouched.
func TestXDPPacketFlows(t *testing.T) {
	ns, ifindex := xdpUplink(t)
	ext, local := model.External, model.External|model.Local
	syn4, syn6 := pkt.TCP(ext4, np4, syn, nil), pkt.TCP(ext6, np6, syn, nil)
	ack4 := pkt.TCP(ext4, np4, pkt.TCPOpts{ACK: true, Seq: 1001, Ack: 5001, Window: 502}, []byte("GET /"))
	udp4, udp6 := pkt.UDP(ext4, np4, []byte("q")), pkt.UDP(ext6, np6, []byte("q"))
	udp4NoSum := append([]byte(nil), udp4...)
	udp4NoSum[14+20+6], udp4NoSum[14+20+7] = 0, 0 // no checksum, as IPv4 allows
	udp4NoSumOut := tx(udp4NoSum, snat(node4, 61234), be4)
	udp4NoSumOut[14+20+6], udp4NoSumOut[14+20+7] = 0, 0

	cases := []struct {
		name     string
		services []model.FrontendBackends
		local    []netip.Addr // pods of this node
		vxlan    bool
		tcFirst  []step // first, through from_net
		steps    []xdpStep
		tc       []step // then, through from_net
	}{
		{
			name:     "NodePort TCPv4, Cluster, backend on another node: sent back out by XDP; the reply and the flow's rest in tc",
			services: []model.FrontendBackends{{Frontend: frontend(np4, model.TCP), Flags: ext, Backends: backends(be4)}},
			steps: []xdpStep{
				{name: "SYN", in: syn4, verdict: xdpTx, out: tx(syn4, snat(node4, 61234), be4)},
				{name: "SYN-ACK from the backend's node: passed to tc", in: pkt.TCP(be4, snat(node4, 61234), synAck, nil), verdict: xdpPass},
				{name: "data: same backend and SNAT port", in: ack4, verdict: xdpTx, out: tx(ack4, snat(node4, 61234), be4)},
			},
			tc: []step{
				{name: "tc translates the reply back from XDP's entries", fromNet: true, in: pkt.TCP(be4, snat(node4, 61234), synAck, nil),
					verdict: actOK, out: pkt.TCP(np4, ext4, synAck, nil)},
				{name: "tc carries the flow on, same SNAT port", fromNet: true, in: ack4, verdict: actOK, out: pkt.Rewrite(ack4, snat(node4, 61234), be4)},
			},
		},
		{
			name:     "a flow tc began (XDP turned on under it) goes on in XDP, on its backend and SNAT port",
			services: []model.FrontendBackends{{Frontend: frontend(np4, model.TCP), Flags: ext, Backends: backends(be4)}},
			tcFirst: []step{
				{name: "tc: SYN", fromNet: true, in: syn4, verdict: actOK, out: pkt.Rewrite(syn4, snat(node4, 61234), be4)},
				{name: "tc: SYN-ACK back", fromNet: true, in: pkt.TCP(be4, snat(node4, 61234), synAck, nil), verdict: actOK,
					out: pkt.TCP(np4, ext4, synAck, nil)},
			},
			steps: []xdpStep{{name: "XDP: data", in: ack4, verdict: xdpTx, out: tx(ack4, snat(node4, 61234), be4)}},
		},
		{
			name: "NodePort TCPv6 and UDP, both families: checksums follow the rewrite; an IPv4 datagram without a checksum keeps none",
			services: []model.FrontendBackends{
				{Frontend: frontend(np6, model.TCP), Flags: ext, Backends: backends(be6)},
				{Frontend: frontend(np4, model.UDP), Flags: ext, Backends: backends(be4)},
				{Frontend: frontend(np6, model.UDP), Flags: ext, Backends: backends(be6)},
			},
			steps: []xdpStep{
				{name: "TCPv6 SYN", in: syn6, verdict: xdpTx, out: tx(syn6, snat(node6, 61234), be6)},
				{name: "UDPv4", in: udp4, verdict: xdpTx, out: tx(udp4, snat(node4, 61234), be4)},
				{name: "UDPv4 without checksum, same flow", in: udp4NoSum, verdict: xdpTx, out: udp4NoSumOut},
				{name: "UDPv6", in: udp6, verdict: xdpTx, out: tx(udp6, snat(node6, 61234), be6)},
			},
		},
		{
			name: "what XDP leaves to tc passes untouched: a backend on this node, no endpoints (tc refuses), a fragment, a ClusterIP, the overlay",
			services: []model.FrontendBackends{
				{Frontend: frontend(np4, model.TCP), Flags: ext, Backends: backends(be4b)},
				{Frontend: frontend(np6, model.TCP), Flags: ext},
				{Frontend: frontend(vip4, model.TCP), Backends: backends(be4)},
				{Frontend: frontend(np4, model.UDP), Flags: ext, Backends: backends(be4)},
			},
			local: []netip.Addr{be4b.Addr()},
			steps: []xdpStep{
				{name: "UDP to a backend elsewhere: forwarded (control)", in: udp4, verdict: xdpTx, out: tx(udp4, snat(node4, 61234), be4)},
				{name: "backend on this node", in: syn4, verdict: xdpPass},
				{name: "no endpoints", in: syn6, verdict: xdpPass},
				{name: "a ClusterIP from outside", in: pkt.TCP(ext4, vip4, syn, nil), verdict: xdpPass},
				{name: "a first fragment", in: pkt.Fragments(pkt.UDP(netip.AddrPortFrom(ext4.Addr(), 61300), np4, bytes.Repeat([]byte("f"), 1200)), 600, 9)[0], verdict: xdpPass},
			},
			tc: []step{
				{name: "tc refuses the frontend without endpoints", fromNet: true, in: syn6, verdict: actRedirect, out: pkt.RST(syn6)},
			},
		},
		{
			name:     "VXLAN routing: a backend on another node is reached through the overlay, which is tc's",
			services: []model.FrontendBackends{{Frontend: frontend(np4, model.UDP), Flags: ext, Backends: backends(be4)}},
			vxlan:    true,
			steps:    []xdpStep{{name: "UDPv4", in: udp4, verdict: xdpPass}},
		},
		{
			name: "Local: this node's endpoints are tc's; with none here, a new flow is dropped in XDP",
			services: []model.FrontendBackends{
				{Frontend: frontend(np4, model.TCP), Flags: local, Backends: backends(be4b)},
				{Frontend: frontend(np6, model.TCP), Flags: local},
			},
			local: []netip.Addr{be4b.Addr()},
			steps: []xdpStep{
				{name: "a local endpoint: passed (control)", in: syn4, verdict: xdpPass},
				{name: "none here: dropped", in: syn6, verdict: xdpDrop, reason: datapath.MonDropNoLocalEndpoint},
			},
		},
		{
			name: "loadBalancerSourceRanges: a client inside forwarded, one outside dropped in XDP",
			services: []model.FrontendBackends{{Frontend: frontend(extIP4, model.TCP), Flags: ext | model.SourceRanges,
				SourceRanges: []netip.Prefix{netip.MustParsePrefix("172.30.0.100/32")}, Backends: backends(be4)}},
			steps: []xdpStep{
				{name: "inside", in: pkt.TCP(ext4, extIP4, syn, nil), verdict: xdpTx, out: tx(pkt.TCP(ext4, extIP4, syn, nil), snat(node4, 61234), be4)},
				{name: "outside", in: pkt.TCP(ext4b, extIP4, syn, nil), verdict: xdpDrop, reason: datapath.MonDropSourceRange},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dp, tables := load(t)
			if err := nat.SetNodeAddrs(dp.Maps(), node4, node6); err != nil {
				t.Fatal(err)
			}
			for _, fb := range c.services {
				if err := tables.Apply(fb); err != nil {
					t.Fatal(err)
				}
			}
			for _, a := range c.local {
				endpoint(t, dp, a, 7)
			}
			if c.vxlan {
				conf := datapath.RouterConf{Mode: datapath.RouterVXLAN, VxlanIfindex: 1, Vni: router.VNI, VxlanMac: vxMAC}
				if err := cube.Put(dp.Maps(), router.MapConfig, uint32(0), conf); err != nil {
					t.Fatal(err)
				}
				key := datapath.PrefixFrom(netip.MustParsePrefix("10.244.2.0/24"))
				if err := cube.Put(dp.Maps(), router.MapNodes, key, datapath.RouterNode{Underlay: datapath.AddrFrom(netip.MustParseAddr("172.30.0.12"))}); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range c.tcFirst {
				run(t, dp, s)
			}
			for _, s := range c.steps {
				runXDP(t, dp, ns, ifindex, s)
			}
			for _, s := range c.tc {
				run(t, dp, s)
			}
			// What XDP did is counted: each forward and drop of the table.
			var tx, dropped uint64
			for _, s := range c.steps {
				switch s.verdict {
				case xdpTx:
					tx++
				case xdpDrop:
					dropped++
				}
			}
			if got := cube.PerCPUSum(dp.Maps().Map(monitor.MapXDP), uint32(datapath.MonXDPForwarded)); got != tx {
				t.Errorf("monitor_xdp forwarded %d, want %d", got, tx)
			}
			if got := cube.PerCPUSum(dp.Maps().Map(monitor.MapXDP), uint32(datapath.MonXDPDropped)); got != dropped {
				t.Errorf("monitor_xdp dropped %d, want %d", got, dropped)
			}
		})
	}
}
