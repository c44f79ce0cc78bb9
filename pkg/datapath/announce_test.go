package datapath_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/model"
)

// TestAnnouncePacketFlows: a node answers ARP and IPv6 neighbour
// solicitations for the LoadBalancer IPs it announces, on the uplink the
// question came in on, with that uplink's MAC; the answer is compared
// byte for byte (checksum included) with a reference encoder's (gopacket).
// Questions for any other address, duplicate address detection (from ::)
// and ARP replies pass to the kernel untouched. BPF_PROG_RUN runs on the
// loopback device (ifindex 1), which is the uplink here.
func TestAnnouncePacketFlows(t *testing.T) {
	dp, tables := load(t)
	uplinkMAC := net.HardwareAddr{0x02, 0x42, 0, 0, 0, 0x01}
	var mac [6]byte
	copy(mac[:], uplinkMAC)
	if err := tables.SetUplinks([]lb.Uplink{{Ifindex: 1, MAC: mac}}); err != nil {
		t.Fatal(err)
	}
	lbIP4, lbIP6 := netip.MustParseAddr("172.30.0.240"), netip.MustParseAddr("fd00:172:30::f0")
	other4, other6 := netip.MustParseAddr("172.30.0.241"), netip.MustParseAddr("fd00:172:30::f1")
	client4, client6 := netip.MustParseAddr("172.30.0.200"), netip.MustParseAddr("fd00:172:30::c8")
	clientMAC := net.HardwareAddr{0x02, 0x42, 0, 0, 0, 0xc8}
	ann := model.External | model.Announce
	for _, fb := range []model.FrontendBackends{
		{Frontend: frontend(netip.AddrPortFrom(lbIP4, 80), model.TCP), Flags: ann, Backends: backends(be4)},
		{Frontend: frontend(netip.AddrPortFrom(lbIP6, 80), model.TCP), Flags: ann, Backends: backends(be6)},
		// Local with no endpoint here: the node does not announce it.
		{Frontend: frontend(netip.AddrPortFrom(other4, 80), model.TCP), Flags: model.External | model.Local},
	} {
		if err := tables.Apply(fb); err != nil {
			t.Fatal(err)
		}
	}
	dad := pkt.NeighborSolicitation(clientMAC, netip.IPv6Unspecified(), lbIP6)

	for _, s := range []step{
		{name: "ARP for the announced IPv4 address: answered", fromNet: true,
			in: pkt.ARP(false, clientMAC, client4, nil, lbIP4), verdict: actRedirect,
			out: pkt.ARP(true, uplinkMAC, lbIP4, clientMAC, client4)},
		{name: "neighbour solicitation for the announced IPv6 address: advertised", fromNet: true,
			in: pkt.NeighborSolicitation(clientMAC, client6, lbIP6), verdict: actRedirect,
			out: pkt.NeighborAdvertisement(uplinkMAC, lbIP6, clientMAC, client6)},
		{name: "ARP for an address not announced (Local, no endpoint here): to the kernel", fromNet: true,
			in: pkt.ARP(false, clientMAC, client4, nil, other4), verdict: actOK},
		{name: "solicitation for another address: to the kernel", fromNet: true,
			in: pkt.NeighborSolicitation(clientMAC, client6, other6), verdict: actOK},
		{name: "duplicate address detection (from ::): not answered", fromNet: true, in: dad, verdict: actOK},
		{name: "an ARP reply: to the kernel", fromNet: true,
			in: pkt.ARP(true, clientMAC, client4, uplinkMAC, lbIP4), verdict: actOK},
	} {
		run(t, dp, s)
	}

	// The Service deleted: no longer answered.
	if err := tables.Delete(frontend(netip.AddrPortFrom(lbIP4, 80), model.TCP)); err != nil {
		t.Fatal(err)
	}
	run(t, dp, step{name: "ARP after the Service went", fromNet: true, in: pkt.ARP(false, clientMAC, client4, nil, lbIP4), verdict: actOK})
}
