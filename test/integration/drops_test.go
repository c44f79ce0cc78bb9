package integration

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/pkt"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/events"
)

// TestMonitorShowsTheRarerDrops causes, with packets on the sandbox's
// real devices, the drops no well-behaved client causes, each after a
// positive control of the same path, and finds each in `netcube monitor`,
// in `hubble observe` (with Hubble's reason) and in netcube_drops_total
// (TestMonitorShowsDrops and TestMonitorShowsExternalDrops cause the
// others):
//   - nat-rewrite-failed: a pod's UDP datagram to a ClusterIP, cut after
//     its ports (the rewrite needs its checksum);
//   - snat-ports-exhausted: 17 clients outside on one port, to a NodePort
//     with one endpoint: the 16 ports probed from it are held;
//   - no-route-to-node: the node sends into the overlay, on a stale route,
//     to a pod CIDR no node holds (a node gone);
//   - malformed: a frame that is not IP out of the overlay device;
//   - unsupported-extension-header: a pod's IPv6 datagram to a ClusterIP
//     with a destination options header;
//   - fragment-without-first: a pod's later fragment to a ClusterIP whose
//     first fragment was never sent;
//   - ct-insert-failed (last: it fills conntrack): new flows from outside
//     once conntrack (256 entries here) is full. Its agents run with early
//     drop off (--conntrack-early-drop=false): with it on, a table full of
//     flows never answered, as these are, gives them up for new ones
//     (test/adversarial TestSYNFloodKeepsEstablishedFlows), and only a
//     table full of answered flows refuses one.
//
// The crafted packets are sent by `netcube-lab pod send` (a raw socket
// through the namespace's routes, or a packet socket on a device).
func TestMonitorShowsTheRarerDrops(t *testing.T) {
	syn := pkt.TCPOpts{SYN: true, Seq: 1000, Window: 64240}
	sb := upWith(t, "td", sandbox.Config{Routing: "vxlan", AgentArgs: []string{"--ct-map-size=256", "--conntrack-early-drop=false"}})
	top := sb.Topology
	node1 := top.Nodes[0]
	client := top.ClientPod()
	var remote sandbox.Pod // an echo pod of another node than the client's
	for _, p := range top.EchoBackends() {
		if p.Node != client.Node {
			remote = p
		}
	}
	clientNode, _ := top.Node(client.Node)
	if clientNode.Name != node1.Name {
		t.Fatalf("the client pod is on %s, not %s", clientNode.Name, node1.Name)
	}
	if err := top.WriteManifest("single.yaml", externalService("single", "NodePort", "Cluster",
		[]string{"10.96.0.44", "fd00:10:96::44"}, [2]int{30120, 30121}, nil, nil, []sandbox.Pod{remote})); err != nil {
		t.Fatal(err)
	}
	nodePort := netip.AddrPortFrom(node1.IP4, 30120)
	udpService := netip.AddrPortFrom(netip.MustParseAddr(sandbox.EchoIPs[0]), sandbox.PodPort)
	mon := watch(t, sb, node1, "--type", "drop")

	// The positive controls: each path the drops below take, answered.
	testenv.WaitFor(t, 10*time.Second, "the NodePort with one endpoint answers from outside", func() bool {
		return fromOutside(t, sb, "tcp", nodePort.String(), 1, "--timeout", "300ms")[0].Err == ""
	})
	for _, c := range []struct{ proto, addr string }{
		{"udp", udpService.String()}, // the tc path to a Service (nat)
		{"tcp", net.JoinHostPort(remote.IP4.String(), fmt.Sprint(sandbox.PodPort))}, // the overlay (router)
	} {
		for _, r := range requests(t, sb, c.proto, c.addr, 2) {
			if r.Err != "" {
				t.Fatalf("positive control %s %s: %s", c.proto, c.addr, r.Err)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	if d := mon.all(); len(d) != 0 {
		t.Fatalf("drops reported for traffic that was answered: %v", d)
	}

	send := func(who string, frames [][]byte, dev string) string {
		t.Helper()
		args := []string{"pod", "send"}
		if dev != "" {
			args = append(args, "--dev", dev)
		}
		for _, f := range frames {
			args = append(args, hex.EncodeToString(f))
		}
		out, err := sb.Output(who, filepath.Join(binDir, sandbox.LabBinary), args...)
		if err != nil {
			t.Fatalf("netcube-lab pod send on %s: %v\n%s", who, err, out)
		}
		return string(out)
	}
	seen := func(reason, cube, point string, match func(events.Event) bool) {
		t.Helper()
		testenv.WaitFor(t, 5*time.Second, reason+" in netcube monitor on "+node1.Name, func() bool {
			return len(mon.find(func(e events.Event) bool {
				return e.Drop == reason && e.Cube == cube && e.Point == point && match(e)
			})) > 0
		})
		if v := dropsMetric(t, sb, node1, reason, cube); v == "0" {
			t.Errorf("netcube_drops_total{reason=%s} on %s is 0", reason, node1.Name)
		}
	}

	// nat-rewrite-failed: the datagram's ports, not its length and checksum.
	src := netip.AddrPortFrom(client.IP4, 40999)
	send(client.Name, [][]byte{pkt.UDP(src, udpService, nil)[:14+20+4]}, "")
	seen("nat-rewrite-failed", "nat", "from-pod", func(e events.Event) bool { return e.Src == src && e.Dst == udpService })

	// snat-ports-exhausted: 16 clients hold the ports probed from 61234.
	var syns [][]byte
	for i := 1; i <= 17; i++ {
		syns = append(syns, pkt.TCP(netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}), 61234), nodePort, syn, nil))
	}
	send(top.External.Name, syns, "")
	seen("snat-ports-exhausted", "nat", "from-network", func(e events.Event) bool {
		return e.Dst == nodePort && e.Src.Port() == 61234 && strings.HasPrefix(e.Src.Addr().String(), "198.18.0.")
	})
	if n := len(mon.find(func(e events.Event) bool { return e.Drop == "snat-ports-exhausted" })); n != 1 {
		t.Errorf("%d clients of 17 refused a SNAT port, want 1 (the 17th)", n)
	}

	// no-route-to-node: a route into the overlay for a pod CIDR no node holds.
	gone := netip.MustParseAddrPort("10.244.99.1:8080")
	if out, err := sb.Output(node1.Name, "ip", "route", "add", "10.244.99.0/24", "dev", router.OverlayDevice); err != nil {
		t.Fatalf("ip route add: %v\n%s", err, out)
	}
	if r := requestsFrom(t, sb, node1.Name, "udp", gone.String(), 1, "--timeout", "200ms")[0]; r.Err == "" {
		t.Errorf("%s answered by %s through the overlay, where no node holds it", gone, r.Backend)
	}
	seen("no-route-to-node", "router", "to-overlay", func(e events.Event) bool { return e.Dst.Addr() == gone.Addr() && e.Proto == "UDP" })

	// malformed: an ARP request out of the overlay device.
	arp := make([]byte, 42)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1})
	if out := send(node1.Name, [][]byte{arp}, router.OverlayDevice); !strings.Contains(out, "1 of 1 frames dropped") {
		t.Errorf("the ARP frame left %s: %q", router.OverlayDevice, out)
	}
	seen("malformed", "router", "to-overlay", func(e events.Event) bool { return e.Len == uint32(len(arp)) })

	// unsupported-extension-header and fragment-without-first: the
	// positive controls are the same datagram without the header, and a
	// datagram's three fragments in order, sent the same way (no drop);
	// then the datagram with the header, and a later fragment alone.
	from6 := netip.AddrPortFrom(client.IP6, 41001)
	udpService6 := netip.AddrPortFrom(netip.MustParseAddr(sandbox.EchoIPs[1]), sandbox.PodPort)
	from4 := netip.AddrPortFrom(client.IP4, 41002)
	datagram := pkt.UDP(from4, udpService, []byte("sixteen bytes..!"))
	send(client.Name, append([][]byte{pkt.UDP(from6, udpService6, []byte("q"))}, pkt.Fragments(datagram, 8, 4242)...), "")
	time.Sleep(300 * time.Millisecond)
	if d := mon.find(func(e events.Event) bool { return e.Src.Addr() == client.IP6 || e.Src == from4 }); len(d) != 0 {
		t.Fatalf("the positive controls (a plain IPv6 datagram, a datagram's fragments in order) dropped: %v", d)
	}
	send(client.Name, [][]byte{pkt.WithExtHeader(pkt.UDP(from6, udpService6, []byte("q")), 60)}, "")
	seen("unsupported-extension-header", "lb", "from-pod", func(e events.Event) bool {
		return e.Src.Addr() == client.IP6 && e.Dst.Addr() == udpService6.Addr()
	})
	send(client.Name, [][]byte{pkt.Fragments(datagram, 8, 4343)[1]}, "")
	seen("fragment-without-first", "lb", "from-pod", func(e events.Event) bool {
		return e.Src.Addr() == client.IP4 && e.Dst.Addr() == udpService.Addr() && e.Proto == "UDP"
	})

	// ct-insert-failed: the positive control, then more new flows than
	// the table holds (two entries each).
	if r := fromOutside(t, sb, "tcp", nodePort.String(), 1)[0]; r.Err != "" {
		t.Fatalf("the NodePort before conntrack is full (the positive control): %s", r.Err)
	}
	syns = syns[:0]
	for i := range 200 {
		c := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 19, byte(i / 250), byte(1 + i%250)}), uint16(20000+i))
		syns = append(syns, pkt.TCP(c, nodePort, syn, nil))
	}
	send(top.External.Name, syns, "")
	seen("ct-insert-failed", "ct", "from-network", func(e events.Event) bool {
		return e.Dst == nodePort && strings.HasPrefix(e.Src.Addr().String(), "198.19.")
	})

	// Hubble names each with its own reason.
	want := map[string]string{
		"nat-rewrite-failed":           "ERROR_WRITING_TO_PACKET",
		"snat-ports-exhausted":         "NO_MAPPING_FOR_NAT_MASQUERADE",
		"no-route-to-node":             "NO_TUNNEL_OR_ENCAPSULATION_ENDPOINT",
		"malformed":                    "INVALID_PACKET_DROPPED",
		"ct-insert-failed":             "CT_MAP_INSERTION_FAILED",
		"unsupported-extension-header": "INVALID_IPV6_EXTENSION_HEADER",
		"fragment-without-first":       "FIRST_LOGICAL_DATAGRAM_FRAGMENT_NOT_FOUND",
	}
	got := map[string]bool{}
	for _, r := range observe(t, sb, node1, "--verdict", "DROPPED") {
		got[r.GetFlow().GetDropReasonDesc().String()] = true
	}
	for reason, hubble := range want {
		if !got[hubble] {
			t.Errorf("hubble observe --verdict DROPPED on %s: no %s flow (%s)", node1.Name, hubble, reason)
		}
	}
}

// TestMonitorShowsNoNodeAddress: a node whose IPv6 address came up after
// its agent started (SLAAC, DHCPv6 late at boot) has no IPv6 address to
// SNAT an external flow to: an IPv6 ExternalIP with externalTrafficPolicy
// Cluster, answered before (the positive control, the agent knowing the
// address), is dropped as no-node-address, seen in netcube monitor, hubble
// observe and the metrics, while its IPv4 twin is still answered.
func TestMonitorShowsNoNodeAddress(t *testing.T) {
	sb := upWith(t, "tn", sandbox.Config{})
	top := sb.Topology
	node1 := top.Nodes[0]
	ext4, ext6 := netip.MustParseAddr("198.51.100.20"), netip.MustParseAddr("fd00:198:51:100::20")
	if err := top.WriteManifest("ext.yaml", externalService("ext", "NodePort", "Cluster", []string{"10.96.0.45", "fd00:10:96::45"},
		// Endpoints on node2 only: node1 SNATs to reach them (one on
		// node1 itself would keep the client, needing no node address).
		[2]int{30122, 30123}, []string{ext4.String(), ext6.String()}, nil, top.Nodes[1].Pods)); err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Addr{ext4, ext6} {
		if err := top.RouteFromExternal(netip.PrefixFrom(a, a.BitLen()), node1.Name); err != nil {
			t.Fatal(err)
		}
	}
	addr4, addr6 := netip.AddrPortFrom(ext4, 80).String(), netip.AddrPortFrom(ext6, 80).String()
	testenv.WaitFor(t, 10*time.Second, "the IPv6 ExternalIP answered (the positive control)", func() bool {
		return fromOutside(t, sb, "tcp", addr6, 1, "--timeout", "300ms")[0].Err == ""
	})

	// The node's IPv6 address, gone while its agent starts, back after.
	out, err := sb.Output(node1.Name, "ip", "-6", "-o", "addr", "show", "scope", "global")
	if err != nil {
		t.Fatal(err)
	}
	var dev, prefix string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 3 && strings.HasPrefix(f[3], node1.IP6.String()+"/") {
			dev, prefix = f[1], f[3]
		}
	}
	if dev == "" {
		t.Fatalf("no %s on %s:\n%s", node1.IP6, node1.Name, out)
	}
	if err := sb.StopAgent(node1.Name, false); err != nil {
		t.Fatal(err)
	}
	if out, err := sb.Output(node1.Name, "ip", "-6", "addr", "del", prefix, "dev", dev); err != nil {
		t.Fatalf("ip addr del: %v\n%s", err, out)
	}
	if err := sb.StartAgent(node1.Name); err != nil {
		t.Fatal(err)
	}
	if out, err := sb.Output(node1.Name, "ip", "-6", "addr", "add", prefix, "dev", dev, "nodad"); err != nil {
		t.Fatalf("ip addr add: %v\n%s", err, out)
	}
	mon := watch(t, sb, node1, "--type", "drop")
	if r := fromOutside(t, sb, "tcp", addr4, 1)[0]; r.Err != "" {
		t.Fatalf("the IPv4 ExternalIP (the node has its IPv4 address): %s", r.Err)
	}
	if r := fromOutside(t, sb, "tcp", addr6, 1, "--timeout", "300ms")[0]; r.Err == "" {
		t.Errorf("%s answered by %s with no IPv6 node address to SNAT to", addr6, r.Backend)
	}
	testenv.WaitFor(t, 5*time.Second, "no-node-address in netcube monitor on "+node1.Name, func() bool {
		return len(mon.find(func(e events.Event) bool {
			return e.Drop == "no-node-address" && e.Cube == "nat" && e.Point == "from-network" && e.Dst.String() == addr6 &&
				e.Src.Addr() == top.External.IP6
		})) > 0
	})
	if v := dropsMetric(t, sb, node1, "no-node-address", "nat"); v == "0" {
		t.Errorf("netcube_drops_total{reason=no-node-address} on %s is 0", node1.Name)
	}
	found := false
	for _, r := range observe(t, sb, node1, "--verdict", "DROPPED", "--to-ip", ext6.String()) {
		found = found || r.GetFlow().GetDropReasonDesc().String() == "NO_MAPPING_FOR_NAT_MASQUERADE"
	}
	if !found {
		t.Errorf("hubble observe --verdict DROPPED --to-ip %s on %s: no NO_MAPPING_FOR_NAT_MASQUERADE flow", ext6, node1.Name)
	}
}
