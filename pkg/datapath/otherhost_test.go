package datapath_test

import (
	"bytes"
	"encoding/hex"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// skbOnDevice is the start of struct __sk_buff, up to ifindex: what
// BPF_PROG_RUN takes to run a tc program on a packet as received on that
// device (the other fields before it zero, as the kernel requires). The
// kernel then sets the packet's pkt_type against that device's MAC
// (eth_type_trans), as the device's receive path does.
type skbOnDevice struct {
	_              [9]uint32 // len .. priority
	IngressIfindex uint32
	Ifindex        uint32
}

// TestFramesForAnotherHost: a frame the uplink receives addressed to
// another host's MAC (a bridge flooding one for a MAC it does not know, as
// for a dead node's until it ages out; PACKET_OTHERHOST for tc) is not
// served by from_net nor by xdp_from_net, even to a LoadBalancer IP this
// node serves too: it passes to the kernel as it came, with nothing
// recorded, and the kernel drops it. The same frame to the uplink's own
// MAC is served first (the positive control), and a broadcast ARP request
// or a neighbour solicitation to the solicited-node multicast address, for
// an address this node announces, is still answered. Both programs run on
// a real uplink (a veth in a namespace of the test's, xdpUplink) whose MAC
// is the tables' (pkt.HostMAC): the kernel tells tc's pkt_type from the
// veth's own MAC, and the lb cube lists that MAC for XDP (SetUplinks).
func TestFramesForAnotherHost(t *testing.T) {
	ns, ifindex := xdpUplink(t)
	deadNodeMAC := [6]byte{0x02, 0xdd, 0, 0, 0, 0x63}
	lbIP4 := netip.MustParseAddrPort("172.30.0.240:80")
	lbIP6 := netip.MustParseAddrPort("[fd00:172:30::f0]:80")
	clientMAC := net.HardwareAddr{0x02, 0x42, 0, 0, 0, 0xc8}
	ann := model.External | model.Announce
	setup := func(t *testing.T) *datapath.Datapath {
		dp, tables := load(t)
		if err := nat.SetNodeAddrs(dp.Maps(), node4, node6); err != nil {
			t.Fatal(err)
		}
		if err := tables.SetUplinks([]lb.Uplink{{Name: "up0", Ifindex: uint32(ifindex), MAC: uplinkMAC}}); err != nil {
			t.Fatal(err)
		}
		for _, fb := range []model.FrontendBackends{
			{Frontend: frontend(lbIP4, model.TCP), Flags: ann, Backends: backends(be4)},
			{Frontend: frontend(lbIP6, model.TCP), Flags: ann, Backends: backends(be6)},
		} {
			apply(t, tables, fb)
		}
		return dp
	}
	own4, own6 := pkt.TCP(ext4, lbIP4, syn, nil), pkt.TCP(ext6, lbIP6, syn, nil)
	// New flows, of other clients: served, they would be balanced,
	// translated and recorded.
	foreign4 := withMACs(pkt.TCP(ext4b, lbIP4, syn, nil), deadNodeMAC, [6]byte(pkt.PodMAC))
	foreign6 := withMACs(pkt.TCP(netip.MustParseAddrPort("[fd00:172:30::101]:61234"), lbIP6, syn, nil), deadNodeMAC, [6]byte(pkt.PodMAC))

	t.Run("from_net", func(t *testing.T) {
		dp := setup(t)
		unicastARP := pkt.ARP(false, clientMAC, ext4.Addr(), nil, lbIP4.Addr())
		copy(unicastARP[0:6], deadNodeMAC[:]) // a unicast probe of the dead node's entry
		for _, s := range []step{
			{name: "IPv4 SYN to the uplink's MAC: balanced, SNATed, sent to the next hop", in: own4, verdict: actRedirect,
				out: tx(own4, snat(node4, 61234), be4)},
			{name: "IPv6 SYN to the uplink's MAC: balanced, SNATed, sent to the next hop", in: own6, verdict: actRedirect,
				out: tx(own6, snat(node6, 61234), be6)},
			{name: "broadcast ARP request for the announced IPv4 address: answered", in: pkt.ARP(false, clientMAC, ext4.Addr(), nil, lbIP4.Addr()),
				verdict: actRedirect, out: pkt.ARP(true, net.HardwareAddr(uplinkMAC[:]), lbIP4.Addr(), clientMAC, ext4.Addr())},
			{name: "solicitation (solicited-node multicast) for the announced IPv6 address: advertised",
				in: pkt.NeighborSolicitation(clientMAC, ext6.Addr(), lbIP6.Addr()), verdict: actRedirect,
				out: pkt.NeighborAdvertisement(net.HardwareAddr(uplinkMAC[:]), lbIP6.Addr(), clientMAC, ext6.Addr())},
			{name: "IPv4 SYN to another host's MAC: to the kernel untouched", in: foreign4, verdict: actOK},
			{name: "IPv6 SYN to another host's MAC: to the kernel untouched", in: foreign6, verdict: actOK},
			{name: "ARP request to another host's MAC: not answered", in: unicastARP, verdict: actOK},
		} {
			flows := countEntries(t, dp, ct.MapFlows)
			runOnUplink(t, dp, ns, ifindex, s)
			if s.verdict == actOK && countEntries(t, dp, ct.MapFlows) != flows {
				t.Errorf("%s: conntrack entries %d -> %d, want none written", s.name, flows, countEntries(t, dp, ct.MapFlows))
			}
		}
	})

	t.Run("xdp_from_net", func(t *testing.T) {
		dp := setup(t)
		for _, s := range []xdpStep{
			{name: "IPv4 SYN to the uplink's MAC: balanced, SNATed, sent back out", in: own4, verdict: xdpTx, out: tx(own4, snat(node4, 61234), be4)},
			{name: "IPv6 SYN to the uplink's MAC: balanced, SNATed, sent back out", in: own6, verdict: xdpTx, out: tx(own6, snat(node6, 61234), be6)},
			{name: "IPv4 SYN to another host's MAC: passed untouched", in: foreign4, verdict: xdpPass},
			{name: "IPv6 SYN to another host's MAC: passed untouched", in: foreign6, verdict: xdpPass},
		} {
			flows := countEntries(t, dp, ct.MapFlows)
			runXDP(t, dp, ns, ifindex, s)
			if s.verdict == xdpPass && countEntries(t, dp, ct.MapFlows) != flows {
				t.Errorf("%s: conntrack entries %d -> %d, want none written", s.name, flows, countEntries(t, dp, ct.MapFlows))
			}
		}
	})
}

// runOnUplink runs s through from_net as received on the uplink (ifindex
// in ns), the frame as it is.
func runOnUplink(t *testing.T, dp *datapath.Datapath, ns netns.NsHandle, ifindex int, s step) {
	t.Helper()
	out := make([]byte, len(s.in)+256)
	opts := &ebpf.RunOptions{Data: s.in, DataOut: out, Context: skbOnDevice{IngressIfindex: uint32(ifindex), Ifindex: uint32(ifindex)}}
	var verdict uint32
	inNetns(t, ns, func() {
		var err error
		if verdict, err = dp.Programs().FromNet.Run(opts); err != nil {
			t.Fatalf("%s: run: %v", s.name, err)
		}
	})
	if verdict != s.verdict {
		t.Errorf("%s: verdict %d, want %d", s.name, verdict, s.verdict)
	}
	want := s.out
	if want == nil {
		want = s.in
	}
	if !bytes.Equal(opts.DataOut, want) {
		t.Errorf("%s: output frame differs\n got: %s\nwant: %s", s.name, hex.EncodeToString(opts.DataOut), hex.EncodeToString(want))
	}
}
