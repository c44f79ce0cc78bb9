package l2announce

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Repeats are when the announcements of a newly elected address go out,
// after the election: at once, then twice more for a lossy link.
var Repeats = []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond}

// Sender sends gratuitous ARP (IPv4) and unsolicited Neighbor
// Advertisements (IPv6) out of the uplinks, through an AF_PACKET socket
// (opened in the network namespace of the caller of NewSender).
type Sender struct {
	links   []lb.Uplink
	repeats []time.Duration

	mu     sync.Mutex
	fd     int // -1: closed
	sent   uint64
	failed bool // a send failed (logged once)
}

// NewSender sends out of links (lb.UplinksByName: those with an
// Ethernet address), at Repeats.
func NewSender(links []lb.Uplink) (*Sender, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: sends only
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket for gratuitous ARP/NA: %w", err)
	}
	return &Sender{links: links, repeats: Repeats, fd: fd}, nil
}

// Announce tells every uplink's link, at each of the repeats, that ip is
// at the uplink's MAC; it returns at once (it is called from the lb
// reconciler's sync).
func (s *Sender) Announce(ip netip.Addr) {
	for _, d := range s.repeats {
		if d == 0 {
			go s.sendLogged(ip)
			continue
		}
		time.AfterFunc(d, func() { s.sendLogged(ip) })
	}
}

func (s *Sender) sendLogged(ip netip.Addr) {
	if err := s.Send(ip); err != nil {
		s.mu.Lock()
		first := !s.failed
		s.failed = true
		s.mu.Unlock()
		if first {
			slog.Error("l2 announce: gratuitous ARP/NA not sent (logged once)", "ip", ip, "err", err)
		}
	}
}

// Send sends one announcement of ip out of every uplink, now.
func (s *Sender) Send(ip netip.Addr) error {
	ip = ip.Unmap()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return errors.New("sender closed")
	}
	var errs []error
	for _, l := range s.links {
		var frame []byte
		var proto uint16
		if ip.Is4() {
			frame, proto = GratuitousARP(l.HardwareAddr(), ip), unix.ETH_P_ARP
		} else {
			frame, proto = UnsolicitedNA(l.HardwareAddr(), ip), unix.ETH_P_IPV6
		}
		sa := &unix.SockaddrLinklayer{Ifindex: int(l.Ifindex), Protocol: htons(proto), Halen: 6}
		copy(sa.Addr[:], frame[:6])
		if err := unix.Sendto(s.fd, frame, 0, sa); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.Name, err))
			continue
		}
		s.sent++
	}
	return errors.Join(errs...)
}

// Sent is how many frames went out.
func (s *Sender) Sent() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// Close closes the socket; announcements still scheduled are dropped.
func (s *Sender) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// GratuitousARP is the Ethernet frame announcing that ip is at mac: an
// ARP request broadcast whose sender and target addresses are both ip
// (RFC 5227's ARP announcement), the target MAC zero.
func GratuitousARP(mac net.HardwareAddr, ip netip.Addr) []byte {
	b := make([]byte, 0, 42)
	b = append(b, broadcast...)
	b = append(b, mac[:6]...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_ARP)
	b = binary.BigEndian.AppendUint16(b, 1)      // hardware: Ethernet
	b = binary.BigEndian.AppendUint16(b, 0x0800) // protocol: IPv4
	b = append(b, 6, 4)
	b = binary.BigEndian.AppendUint16(b, 1) // request
	a := ip.As4()
	b = append(b, mac[:6]...)
	b = append(b, a[:]...)
	b = append(b, 0, 0, 0, 0, 0, 0)
	return append(b, a[:]...)
}

// allNodes is ff02::1, and its Ethernet multicast address.
var (
	allNodes    = netip.MustParseAddr("ff02::1")
	allNodesMAC = net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}
)

// UnsolicitedNA is the Ethernet frame announcing that ip is at mac: a
// Neighbor Advertisement (RFC 4861 7.2.6) from ip to all nodes (ff02::1),
// hop limit 255, neither Router nor Solicited but Override set, with the
// target link-layer address option.
func UnsolicitedNA(mac net.HardwareAddr, ip netip.Addr) []byte {
	const payload = 4 + 4 + 16 + 8 // ICMPv6 header, flags, target, option
	b := make([]byte, 0, 14+40+payload)
	b = append(b, allNodesMAC...)
	b = append(b, mac[:6]...)
	b = binary.BigEndian.AppendUint16(b, unix.ETH_P_IPV6)
	b = append(b, 0x60, 0, 0, 0) // version 6, no traffic class nor flow label
	b = binary.BigEndian.AppendUint16(b, payload)
	b = append(b, unix.IPPROTO_ICMPV6, 255)
	src, dst := ip.As16(), allNodes.As16()
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	icmp := len(b)
	b = append(b, 136, 0, 0, 0)  // Neighbor Advertisement, code 0, checksum
	b = append(b, 0x20, 0, 0, 0) // Override
	b = append(b, src[:]...)     // target
	b = append(b, 2, 1)          // target link-layer address, 8 bytes
	b = append(b, mac[:6]...)
	binary.BigEndian.PutUint16(b[icmp+2:], icmpv6Checksum(src, dst, b[icmp:]))
	return b
}

// icmpv6Checksum: the Internet checksum over the IPv6 pseudo-header and
// the ICMPv6 message (its checksum field zero).
func icmpv6Checksum(src, dst [16]byte, msg []byte) uint16 {
	var sum uint32
	add := func(p []byte) {
		for i := 0; i+1 < len(p); i += 2 {
			sum += uint32(p[i])<<8 | uint32(p[i+1])
		}
		if len(p)%2 == 1 {
			sum += uint32(p[len(p)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	var l [8]byte
	binary.BigEndian.PutUint32(l[:4], uint32(len(msg)))
	l[7] = unix.IPPROTO_ICMPV6
	add(l[:])
	add(msg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
