package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// progRunIfindex is the device BPF_PROG_RUN gives a packet (loopback):
// the "pod device" of these tests.
const progRunIfindex = 1

func podSource(t testing.TB, dp *datapath.Datapath, a netip.Addr, ifindex uint32) {
	t.Helper()
	if err := cube.Put(dp.Maps(), router.MapSources, datapath.AddrFrom(a), datapath.RouterSource{Ifindex: ifindex}); err != nil {
		t.Fatal(err)
	}
}

// TestForgedSourcesAreDropped: from_pod lets a pod send only from its own
// addresses, on its own device (router_sources, which the router cube
// writes from the CNI plugin's neighbour entries), whatever the protocol;
// IPv6 link-local and unspecified sources only to the link (neighbour
// discovery, DAD, MLD). Each forged case follows its positive control on
// the same path; every drop is counted as invalid-source.
func TestForgedSourcesAreDropped(t *testing.T) {
	testenv.RequireRoot(t)
	dp, err := datapath.Load(datapath.Config{MapSizes: map[string]uint32{"ct_flows": 4096}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	tables := lb.New(dp.Maps())
	apply(t, tables, model.FrontendBackends{Frontend: frontend(vip4, model.TCP), Backends: backends(be4)})

	own4, own6 := client4, client6
	other4 := netip.MustParseAddrPort("10.244.1.12:40000") // another pod of this node
	other6 := netip.MustParseAddrPort("[fd00:10:244:1::12]:40000")
	elsewhere4 := netip.MustParseAddrPort("10.244.1.13:40000") // a pod of this node on another device
	sources := map[datapath.Addr]datapath.RouterSource{
		datapath.AddrFrom(own4.Addr()): {Ifindex: progRunIfindex}, datapath.AddrFrom(own6.Addr()): {Ifindex: progRunIfindex},
		datapath.AddrFrom(other4.Addr()): {Ifindex: 7}, datapath.AddrFrom(other6.Addr()): {Ifindex: 7},
		datapath.AddrFrom(elsewhere4.Addr()): {Ifindex: 7},
	}
	nodeAddr := netip.AddrPortFrom(node4, 40000)
	lla := netip.MustParseAddr("fe80::2")
	unspec := netip.IPv6Unspecified()

	cases := []struct {
		name   string
		in     []byte
		forged bool
	}{
		{"UDP from the pod's own address", pkt.UDP(own4, pod4, []byte("q")), false},
		{"UDP posing as another pod", pkt.UDP(other4, pod4, []byte("q")), true},
		{"UDP posing as the node", pkt.UDP(nodeAddr, pod4, []byte("q")), true},
		{"UDP from an address no pod has", pkt.UDP(netip.MustParseAddrPort("192.0.2.1:53"), pod4, []byte("q")), true},
		{"UDP from a pod address of another device", pkt.UDP(elsewhere4, pod4, []byte("q")), true},
		{"TCP SYN to a ClusterIP from the pod's own address", pkt.TCP(own4, vip4, syn, nil), false},
		{"TCP SYN to a ClusterIP posing as another pod", pkt.TCP(other4, vip4, syn, nil), true},
		{"ICMP echo from the pod's own address", pkt.Echo(own4.Addr(), pod4.Addr(), 1, 1, false, nil), false},
		{"ICMP echo posing as another pod", pkt.Echo(other4.Addr(), pod4.Addr(), 1, 1, false, nil), true},
		{"GRE from the pod's own address", pkt.WithProto(pkt.UDP(own4, pod4, nil), 47), false},
		{"GRE posing as the node", pkt.WithProto(pkt.UDP(nodeAddr, pod4, nil), 47), true},
		{"IPv6 UDP from the pod's own address", pkt.UDP(own6, be6, []byte("q")), false},
		{"IPv6 UDP posing as another pod", pkt.UDP(other6, be6, []byte("q")), true},
		{"IPv6 link-local to the gateway (neighbour discovery)", pkt.Echo(lla, netip.MustParseAddr("fe80::1"), 1, 1, false, nil), false},
		{"IPv6 MLD report from link-local", pkt.WithExtHeader(pkt.Echo(lla, netip.MustParseAddr("ff02::16"), 1, 1, false, nil), 0), false},
		{"IPv6 DAD probe from ::", pkt.NeighborSolicitation(pkt.PodMAC, unspec, own6.Addr()), false},
		{"IPv6 link-local source to a routable address", pkt.UDP(netip.AddrPortFrom(lla, 1), be6, []byte("q")), true},
		{"IPv6 unspecified source to a routable address", pkt.UDP(netip.AddrPortFrom(unspec, 1), be6, []byte("q")), true},
		{"ARP (no IP source to check)", pkt.ARP(false, pkt.PodMAC, own4.Addr(), nil, netip.MustParseAddr("169.254.1.1")), false},
	}
	// The same table through each way the check finds a pod's
	// addresses: router_sources alone (a device whose slot another
	// holds), the device's slot (the fast path, as the router cube lays
	// it out), and a slot of another device (ifindex 1 + the size: it
	// names other4, which must not pass on this device).
	ways := []struct {
		name  string
		write func(t *testing.T)
	}{
		{"router_sources alone", func(t *testing.T) {
			for a, s := range sources {
				if err := cube.Put(dp.Maps(), router.MapSources, a, s); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"the device's slot", func(t *testing.T) {
			if err := router.PutSources(dp.Maps(), sources); err != nil {
				t.Fatal(err)
			}
			var slot datapath.RouterSourceSlot
			if err := dp.Maps().Map(router.MapSourceSlots).Lookup(uint32(progRunIfindex), &slot); err != nil || slot.Ifindex != progRunIfindex {
				t.Fatalf("the pod's slot: %+v, %v", slot, err)
			}
		}},
		{"a slot of another device", func(t *testing.T) {
			if err := router.PutSources(dp.Maps(), sources); err != nil {
				t.Fatal(err)
			}
			o := datapath.AddrFrom(other4.Addr())
			stranger := datapath.RouterSourceSlot{Ifindex: progRunIfindex + dp.Maps().Size(router.MapSourceSlots), Addrs: [2]datapath.Addr{o, o}}
			if err := cube.Put(dp.Maps(), router.MapSourceSlots, uint32(progRunIfindex), stranger); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			if err := router.PutSources(dp.Maps(), nil); err != nil {
				t.Fatal(err)
			}
			way.write(t)
			checkSources(t, dp, cases)
		})
	}
}

// checkSources runs each packet through from_pod: a forged one is dropped
// as invalid-source, any other goes on.
func checkSources(t *testing.T, dp *datapath.Datapath, cases []struct {
	name   string
	in     []byte
	forged bool
}) {
	for _, c := range cases {
		before := drops(t, dp)[datapath.MonDropInvalidSource]
		v := runProg(t, dp.Programs().FromPod, c.in)
		after := drops(t, dp)[datapath.MonDropInvalidSource]
		if c.forged && (v != actShot || after != before+1) {
			t.Errorf("%s: verdict %d, invalid-source drops +%d; want dropped as invalid-source", c.name, v, after-before)
		}
		if !c.forged && (v == actShot || after != before) {
			t.Errorf("%s: verdict %d, invalid-source drops +%d; want it to go on", c.name, v, after-before)
		}
	}
}
