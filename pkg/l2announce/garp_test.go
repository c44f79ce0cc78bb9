package l2announce

import (
	"github.com/netcube/netcube/pkg/cubes/lb"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/internal/testenv"
)

// vethPair makes a network namespace holding a veth pair, both ends up,
// and returns the namespace and the ends' links there.
func vethPair(t *testing.T) (netns.NsHandle, lb.Uplink, lb.Uplink) {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.Name("nc-garp")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() }) // the veths go with it
	ipn := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ipn("link", "add", "ga", "address", "02:00:00:00:0a:01", "type", "veth", "peer", "name", "gb")
	ipn("link", "set", "ga", "up")
	ipn("link", "set", "gb", "up")
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	var a, b lb.Uplink
	inNetns(t, ns, func() {
		links, err := lb.UplinksByName([]string{"ga", "gb"})
		if err != nil || len(links) != 2 {
			t.Fatalf("links %v: %v", links, err)
		}
		a, b = links[0], links[1]
	})
	return ns, a, b
}

// inNetns runs fn on this goroutine's thread moved into ns; sockets made
// there stay of ns.
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

// capture is an AF_PACKET socket on one interface, every protocol.
type capture struct{ fd int }

func openCapture(t *testing.T, ns netns.NsHandle, l lb.Uplink) *capture {
	t.Helper()
	var c capture
	inNetns(t, ns, func() {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: int(l.Ifindex)}); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		c.fd = fd
	})
	t.Cleanup(func() { unix.Close(c.fd) })
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return &c
}

type frame struct {
	at time.Time
	b  []byte
}

// next returns the frames of ethertype seen until timeout (others, such
// as the kernel's own IPv6 traffic, are skipped), up to n.
func (c *capture) next(t *testing.T, ethertype uint16, n int, timeout time.Duration) []frame {
	t.Helper()
	var out []frame
	buf := make([]byte, 2048)
	for end := time.Now().Add(timeout); len(out) < n && time.Now().Before(end); {
		k, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if k < 14 || uint16(buf[12])<<8|uint16(buf[13]) != ethertype {
			continue
		}
		if ethertype == unix.ETH_P_IPV6 && (k < 55 || buf[20] != unix.IPPROTO_ICMPV6 || buf[54] != 136) {
			continue // not a Neighbor Advertisement
		}
		out = append(out, frame{time.Now(), append([]byte(nil), buf[:k]...)})
	}
	return out
}

// TestGratuitousARPAndNA sends the announcements of an IPv4 and an IPv6
// address out of one end of a veth pair and checks, on the other, every
// field of the frames and that they repeat at Repeats.
func TestGratuitousARPAndNA(t *testing.T) {
	ns, a, b := vethPair(t)
	capB := openCapture(t, ns, b)
	var s *Sender
	inNetns(t, ns, func() {
		var err error
		if s, err = NewSender([]lb.Uplink{a}); err != nil {
			t.Fatal(err)
		}
	})
	defer s.Close()

	v4 := netip.MustParseAddr("172.30.100.7")
	sentAt := time.Now()
	s.Announce(v4)
	got := capB.next(t, unix.ETH_P_ARP, 3, 2*time.Second)
	if len(got) != 3 {
		t.Fatalf("%d ARP frames seen, want 3 (at %v)", len(got), Repeats)
	}
	for i, f := range got {
		p := gopacket.NewPacket(f.b, layers.LayerTypeEthernet, gopacket.Default)
		eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		arp, _ := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		if eth == nil || arp == nil {
			t.Fatalf("frame %d: not Ethernet/ARP: %v", i, p)
		}
		if eth.DstMAC.String() != "ff:ff:ff:ff:ff:ff" || eth.SrcMAC.String() != a.HardwareAddr().String() || eth.EthernetType != layers.EthernetTypeARP {
			t.Errorf("frame %d: Ethernet %s > %s type %s", i, eth.SrcMAC, eth.DstMAC, eth.EthernetType)
		}
		if arp.AddrType != layers.LinkTypeEthernet || arp.Protocol != layers.EthernetTypeIPv4 || arp.HwAddressSize != 6 || arp.ProtAddressSize != 4 ||
			arp.Operation != layers.ARPRequest ||
			net.HardwareAddr(arp.SourceHwAddress).String() != a.HardwareAddr().String() || net.IP(arp.SourceProtAddress).String() != v4.String() ||
			net.HardwareAddr(arp.DstHwAddress).String() != "00:00:00:00:00:00" || net.IP(arp.DstProtAddress).String() != v4.String() {
			t.Errorf("frame %d: ARP %+v", i, arp)
		}
		if len(f.b) < 42 {
			t.Errorf("frame %d: %d bytes", i, len(f.b))
		}
	}
	for i, want := range Repeats {
		if d := got[i].at.Sub(sentAt); d < want || d > want+80*time.Millisecond {
			t.Errorf("ARP frame %d seen %s after Announce, want %s", i, d, want)
		}
	}
	t.Logf("ARP frames seen at %s, %s, %s after Announce", got[0].at.Sub(sentAt), got[1].at.Sub(sentAt), got[2].at.Sub(sentAt))

	v6 := netip.MustParseAddr("fd00:172:30::7")
	if err := s.Send(v6); err != nil {
		t.Fatal(err)
	}
	nas := capB.next(t, unix.ETH_P_IPV6, 1, time.Second)
	if len(nas) != 1 {
		t.Fatal("no Neighbor Advertisement seen")
	}
	p := gopacket.NewPacket(nas[0].b, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	ip6, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	icmp, _ := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	na, _ := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	if eth == nil || ip6 == nil || icmp == nil || na == nil {
		t.Fatalf("not Ethernet/IPv6/ICMPv6/NA: %v", p)
	}
	if eth.DstMAC.String() != "33:33:00:00:00:01" || eth.SrcMAC.String() != a.HardwareAddr().String() || eth.EthernetType != layers.EthernetTypeIPv6 {
		t.Errorf("Ethernet %s > %s type %s", eth.SrcMAC, eth.DstMAC, eth.EthernetType)
	}
	if ip6.SrcIP.String() != v6.String() || ip6.DstIP.String() != "ff02::1" || ip6.HopLimit != 255 || ip6.NextHeader != layers.IPProtocolICMPv6 || ip6.Length != 32 {
		t.Errorf("IPv6 %s > %s hop limit %d next %s length %d", ip6.SrcIP, ip6.DstIP, ip6.HopLimit, ip6.NextHeader, ip6.Length)
	}
	if icmp.TypeCode != layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0) {
		t.Errorf("ICMPv6 %s", icmp.TypeCode)
	}
	icmp.SetNetworkLayerForChecksum(ip6)
	if err, res := icmp.VerifyChecksum(); err != nil || !res.Valid {
		t.Errorf("ICMPv6 checksum %#04x: %v %+v", icmp.Checksum, err, res)
	}
	if !na.Override() || na.Solicited() || na.Router() || na.TargetAddress.String() != v6.String() {
		t.Errorf("NA flags %#x target %s", na.Flags, na.TargetAddress)
	}
	if len(na.Options) != 1 || na.Options[0].Type != layers.ICMPv6OptTargetAddress || net.HardwareAddr(na.Options[0].Data).String() != a.HardwareAddr().String() {
		t.Errorf("NA options %+v, want the target link-layer address %s", na.Options, a.HardwareAddr())
	}
	if s.Sent() != 4 {
		t.Errorf("sent %d frames, want 4", s.Sent())
	}
}

// TestNeighbourFollowsAnnouncement: a Linux neighbour on the link moves
// its entry for the address to the announcing MAC (what a client or its
// router does on a failover).
func TestNeighbourFollowsAnnouncement(t *testing.T) {
	ns, a, b := vethPair(t)
	name := testenv.Name("nc-garp")
	v4, v6 := "172.30.100.7", "fd00:172:30::7"
	// The neighbour has an address on the link (Linux takes an ARP
	// announcement for an address it routes as unicast).
	for _, args := range [][]string{
		{"addr", "add", "172.30.100.2/24", "dev", b.Name},
		{"-6", "addr", "add", "fd00:172:30::2/64", "dev", b.Name, "nodad"},
		{"neigh", "add", v4, "lladdr", "02:00:00:00:0b:99", "dev", b.Name, "nud", "stale"},
		{"-6", "neigh", "add", v6, "lladdr", "02:00:00:00:0b:99", "dev", b.Name, "nud", "stale"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	var s *Sender
	inNetns(t, ns, func() {
		var err error
		if s, err = NewSender([]lb.Uplink{a}); err != nil {
			t.Fatal(err)
		}
	})
	defer s.Close()
	for _, ip := range []string{v4, v6} {
		if err := s.Send(netip.MustParseAddr(ip)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ip := range []string{v4, v6} {
		var out []byte
		testenv.WaitFor(t, 2*time.Second, "the neighbour entry of "+ip+" to move to "+a.HardwareAddr().String(), func() bool {
			out, _ = exec.Command("ip", "-n", name, "neigh", "show", ip, "dev", b.Name).CombinedOutput()
			return strings.Contains(string(out), a.HardwareAddr().String())
		})
	}
}
