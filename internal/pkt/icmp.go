package pkt

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Echo builds an ICMP (IPv4) or ICMPv6 echo request, or its reply, from
// src to dst with identifier id and sequence seq.
func Echo(src, dst netip.Addr, id, seq uint16, reply bool, payload []byte) []byte {
	if src.Is4() {
		t := uint8(layers.ICMPv4TypeEchoRequest)
		if reply {
			t = layers.ICMPv4TypeEchoReply
		}
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(t, 0), Id: id, Seq: seq}
		return build(src, dst, layers.IPProtocolICMPv4, icmp, payload)
	}
	t := uint8(layers.ICMPv6TypeEchoRequest)
	if reply {
		t = layers.ICMPv6TypeEchoReply
	}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(t, 0)}
	body := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, id), seq)
	return build(src, dst, layers.IPProtocolICMPv6, icmp, append(body, payload...))
}

// EchoOf returns an echo's addresses and identifier.
func EchoOf(packet []byte) (src, dst netip.Addr, id uint16) {
	src, dst, _ = flowOf(packet)
	l4 := 14 + 20
	if src.Is6() {
		l4 = 14 + 40
	}
	return src, dst, binary.BigEndian.Uint16(packet[l4+4:])
}

// ErrorKind is an ICMP error netcube translates.
type ErrorKind int

const (
	PortUnreach  ErrorKind = iota // destination (port) unreachable
	FragNeeded                    // fragmentation needed (IPv4) / packet too big (IPv6), with an MTU
	TimeExceeded                  // TTL / hop limit exceeded in transit
)

// Error builds the ICMP error a router or host at from sends to to about
// packet (an Ethernet frame as it was sent), quoting the first quoteLen
// bytes of its IP packet (0: all of it), as a router does (RFC 792: the
// IP header and 8 bytes; RFC 4443: as much as fits).
func Error(from, to netip.Addr, kind ErrorKind, mtu uint16, packet []byte, quoteLen int) []byte {
	quote := packet[14:]
	if quoteLen > 0 && quoteLen < len(quote) {
		quote = quote[:quoteLen]
	}
	quote = append([]byte(nil), quote...)
	if from.Is4() {
		var tc layers.ICMPv4TypeCode
		var seq uint16
		switch kind {
		case PortUnreach:
			tc = layers.CreateICMPv4TypeCode(3, 3)
		case FragNeeded:
			tc, seq = layers.CreateICMPv4TypeCode(3, 4), mtu // the next hop's MTU: the header's last 16 bits
		case TimeExceeded:
			tc = layers.CreateICMPv4TypeCode(11, 0)
		}
		icmp := &layers.ICMPv4{TypeCode: tc, Seq: seq}
		return buildFrom(from, to, HostMAC, PodMAC, layers.IPProtocolICMPv4, icmp, quote)
	}
	var tc layers.ICMPv6TypeCode
	rest := make([]byte, 4)
	switch kind {
	case PortUnreach:
		tc = layers.CreateICMPv6TypeCode(1, 4)
	case FragNeeded:
		tc = layers.CreateICMPv6TypeCode(2, 0)
		binary.BigEndian.PutUint32(rest, uint32(mtu))
	case TimeExceeded:
		tc = layers.CreateICMPv6TypeCode(3, 0)
	}
	icmp := &layers.ICMPv6{TypeCode: tc}
	return buildFrom(from, to, HostMAC, PodMAC, layers.IPProtocolICMPv6, icmp, append(rest, quote...))
}

// TranslateQuote is packet (an Ethernet frame as sent) with its source
// and destination (an echo: its identifier as the source port) replaced,
// as an ICMP error's quote of it is translated: the IPv4 header checksum
// recomputed, the TCP/UDP/ICMP checksum left as it was (no receiver checks
// a quoted one). The frame's Ethernet header is kept.
func TranslateQuote(packet []byte, src, dst netip.AddrPort) []byte {
	out := append([]byte(nil), packet...)
	ip := out[14:]
	var l4 []byte
	var proto byte
	if ip[0]>>4 == 4 {
		copy(ip[12:16], src.Addr().AsSlice())
		copy(ip[16:20], dst.Addr().AsSlice())
		ihl := int(ip[0]&0x0f) * 4
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip[:ihl]))
		proto, l4 = ip[9], ip[ihl:]
	} else {
		copy(ip[8:24], src.Addr().AsSlice())
		copy(ip[24:40], dst.Addr().AsSlice())
		proto, l4 = ip[6], ip[40:]
	}
	switch layers.IPProtocol(proto) {
	case layers.IPProtocolICMPv4, layers.IPProtocolICMPv6:
		binary.BigEndian.PutUint16(l4[4:], src.Port())
	default:
		binary.BigEndian.PutUint16(l4[0:], src.Port())
		binary.BigEndian.PutUint16(l4[2:], dst.Port())
	}
	return out
}

// Hop is packet after one router hop: its TTL (hop limit) one less, the
// IPv4 header checksum recomputed; nothing else changes.
func Hop(packet []byte) []byte {
	out := append([]byte(nil), packet...)
	ip := out[14:]
	if ip[0]>>4 == 4 {
		ip[8]--
		ihl := int(ip[0]&0x0f) * 4
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip[:ihl]))
		return out
	}
	ip[7]--
	return out
}

// WithTTL is packet with TTL (hop limit) ttl, the IPv4 checksum recomputed.
func WithTTL(packet []byte, ttl uint8) []byte {
	out := append([]byte(nil), packet...)
	ip := out[14:]
	if ip[0]>>4 == 4 {
		ip[8] = ttl + 1
	} else {
		ip[7] = ttl + 1
	}
	return Hop(out)
}

// ICMPValid says whether an ICMP or ICMPv6 packet's checksum is right, as
// gopacket computes it (independently of the datapath's C).
func ICMPValid(packet []byte) bool {
	p := gopacket.NewPacket(packet, layers.LayerTypeEthernet, gopacket.Default)
	var again []byte
	switch l := p.Layer(layers.LayerTypeICMPv4).(type) {
	case *layers.ICMPv4:
		ip := p.NetworkLayer().(*layers.IPv4)
		icmp := &layers.ICMPv4{TypeCode: l.TypeCode, Id: l.Id, Seq: l.Seq}
		again = buildFrom(addrOf(ip.SrcIP), addrOf(ip.DstIP), HostMAC, PodMAC, layers.IPProtocolICMPv4, icmp, l.Payload)
		return binary.BigEndian.Uint16(again[14+20+2:]) == l.Checksum
	}
	if l, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		ip := p.NetworkLayer().(*layers.IPv6)
		icmp := &layers.ICMPv6{TypeCode: l.TypeCode}
		again = buildFrom(addrOf(ip.SrcIP), addrOf(ip.DstIP), HostMAC, PodMAC, layers.IPProtocolICMPv6, icmp, l.Payload)
		return binary.BigEndian.Uint16(again[14+40+2:]) == l.Checksum
	}
	return false
}

func addrOf(b net.IP) netip.Addr {
	if v4 := b.To4(); v4 != nil {
		a, _ := netip.AddrFromSlice(v4)
		return a
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
