// Package pkt builds the packets of the datapath tests (Katran-style
// fixtures: input packet -> expected verdict and output packet) with
// gopacket, so expected bytes, lengths and checksums come from an
// independent implementation rather than from our own C.
package pkt

import (
	"net"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// MAC addresses of the pod and of its host-side veth.
var (
	PodMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	HostMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
)

// TCPOpts describes the TCP header of a built packet.
type TCPOpts struct {
	SYN, ACK, RST, FIN bool
	Seq, Ack           uint32
	Window             uint16
}

// TCP builds an Ethernet/IP/TCP packet from src to dst.
func TCP(src, dst netip.AddrPort, o TCPOpts, payload []byte) []byte {
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()),
		SYN: o.SYN, ACK: o.ACK, RST: o.RST, FIN: o.FIN, Seq: o.Seq, Ack: o.Ack, Window: o.Window,
	}
	return build(src.Addr(), dst.Addr(), layers.IPProtocolTCP, tcp, payload)
}

// UDP builds an Ethernet/IP/UDP packet from src to dst.
func UDP(src, dst netip.AddrPort, payload []byte) []byte {
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	return build(src.Addr(), dst.Addr(), layers.IPProtocolUDP, udp, payload)
}

// Rewrite returns the packet with its layer-3/4 source and destination
// replaced, as the datapath's DNAT or reverse NAT should leave it; everything
// else (TTL, IDs, flags, payload) is kept and checksums are recomputed.
func Rewrite(packet []byte, src, dst netip.AddrPort) []byte {
	return rebuild(packet, func(l gopacket.Layer) {
		switch l := l.(type) {
		case *layers.IPv4:
			l.SrcIP, l.DstIP = src.Addr().AsSlice(), dst.Addr().AsSlice()
		case *layers.IPv6:
			l.SrcIP, l.DstIP = src.Addr().AsSlice(), dst.Addr().AsSlice()
		case *layers.TCP:
			l.SrcPort, l.DstPort = layers.TCPPort(src.Port()), layers.TCPPort(dst.Port())
		case *layers.UDP:
			l.SrcPort, l.DstPort = layers.UDPPort(src.Port()), layers.UDPPort(dst.Port())
		}
	})
}

// rebuild decodes an Ethernet/IP/TCP-or-UDP packet, lets edit change its
// layers, and serializes it again with lengths and checksums recomputed.
func rebuild(packet []byte, edit func(gopacket.Layer)) []byte {
	p := gopacket.NewPacket(packet, layers.LayerTypeEthernet, gopacket.Default)
	var ls []gopacket.SerializableLayer
	var network gopacket.NetworkLayer
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case *layers.Ethernet:
			ls = append(ls, l)
		case *layers.IPv4:
			edit(l)
			network = l
			ls = append(ls, l)
		case *layers.IPv6:
			edit(l)
			network = l
			ls = append(ls, l)
		case *layers.TCP:
			edit(l)
			_ = l.SetNetworkLayerForChecksum(network)
			ls = append(ls, l, gopacket.Payload(l.Payload))
		case *layers.UDP:
			edit(l)
			_ = l.SetNetworkLayerForChecksum(network)
			ls = append(ls, l, gopacket.Payload(l.Payload))
		}
	}
	return serialize(ls...)
}

// RST builds the reset the datapath must answer a TCP SYN (no ACK, seq s,
// no payload) with: from the SYN's destination, acking s+1.
func RST(syn []byte) []byte {
	src, dst, tcp := flowOf(syn)
	reply := &layers.TCP{SrcPort: tcp.DstPort, DstPort: tcp.SrcPort, RST: true, ACK: true, Ack: tcp.Seq + 1}
	return buildFrom(dst, src, HostMAC, PodMAC, layers.IPProtocolTCP, reply, nil)
}

// PortUnreachable builds the ICMP (v4) or ICMPv6 port-unreachable error the
// datapath must answer a UDP packet with, quoting its IP header + 8 bytes.
func PortUnreachable(udp []byte) []byte {
	src, dst, _ := flowOf(udp)
	ipPacket := udp[14:]
	if src.Is4() {
		quote := ipPacket[:20+8]
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}
		return buildFrom(dst, src, HostMAC, PodMAC, layers.IPProtocolICMPv4, icmp, quote)
	}
	quote := append(make([]byte, 4), ipPacket[:40+8]...) // 4 unused bytes, then the quote
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(1, 4)}
	return buildFrom(dst, src, HostMAC, PodMAC, layers.IPProtocolICMPv6, icmp, quote)
}

func flowOf(packet []byte) (src, dst netip.Addr, tcp *layers.TCP) {
	p := gopacket.NewPacket(packet, layers.LayerTypeEthernet, gopacket.Default)
	if ip4, ok := p.NetworkLayer().(*layers.IPv4); ok {
		src, _ = netip.AddrFromSlice(ip4.SrcIP.To4())
		dst, _ = netip.AddrFromSlice(ip4.DstIP.To4())
	} else if ip6, ok := p.NetworkLayer().(*layers.IPv6); ok {
		src, _ = netip.AddrFromSlice(ip6.SrcIP)
		dst, _ = netip.AddrFromSlice(ip6.DstIP)
	}
	tcp, _ = p.TransportLayer().(*layers.TCP)
	return src, dst, tcp
}

func build(src, dst netip.Addr, proto layers.IPProtocol, l4 gopacket.SerializableLayer, payload []byte) []byte {
	return buildFrom(src, dst, PodMAC, HostMAC, proto, l4, payload)
}

func buildFrom(src, dst netip.Addr, smac, dmac net.HardwareAddr, proto layers.IPProtocol,
	l4 gopacket.SerializableLayer, payload []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: smac, DstMAC: dmac}
	var ip gopacket.NetworkLayer
	var ipLayer gopacket.SerializableLayer
	if src.Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		v4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		if proto != layers.IPProtocolICMPv4 && !isRST(l4) {
			v4.Id, v4.Flags = 0x1234, layers.IPv4DontFragment // what a pod's stack sends
		}
		ip, ipLayer = v4, v4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		ip, ipLayer = v6, v6
	}
	if c, ok := l4.(interface {
		SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
	}); ok {
		_ = c.SetNetworkLayerForChecksum(ip)
	}
	return serialize(eth, ipLayer, l4, gopacket.Payload(payload))
}

// withoutPadding drops the padding gopacket adds to reach Ethernet's 60-byte
// minimum: on a veth (and in BPF_PROG_RUN) frames are not padded.
func withoutPadding(frame []byte) []byte {
	switch {
	case frame[12] == 0x08 && frame[13] == 0x00:
		return frame[:14+(int(frame[16])<<8|int(frame[17]))]
	case frame[12] == 0x86 && frame[13] == 0xdd:
		return frame[:14+40+(int(frame[18])<<8|int(frame[19]))]
	}
	return frame
}

func isRST(l gopacket.SerializableLayer) bool {
	t, ok := l.(*layers.TCP)
	return ok && t.RST
}

func serialize(ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		panic(err)
	}
	return withoutPadding(buf.Bytes())
}

// Endpoints returns a TCP or UDP packet's source and destination.
func Endpoints(packet []byte) (src, dst netip.AddrPort) {
	p := gopacket.NewPacket(packet, layers.LayerTypeEthernet, gopacket.Default)
	var s, d netip.Addr
	if ip4, ok := p.NetworkLayer().(*layers.IPv4); ok {
		s, _ = netip.AddrFromSlice(ip4.SrcIP.To4())
		d, _ = netip.AddrFromSlice(ip4.DstIP.To4())
	} else if ip6, ok := p.NetworkLayer().(*layers.IPv6); ok {
		s, _ = netip.AddrFromSlice(ip6.SrcIP)
		d, _ = netip.AddrFromSlice(ip6.DstIP)
	}
	switch l4 := p.TransportLayer().(type) {
	case *layers.TCP:
		return netip.AddrPortFrom(s, uint16(l4.SrcPort)), netip.AddrPortFrom(d, uint16(l4.DstPort))
	case *layers.UDP:
		return netip.AddrPortFrom(s, uint16(l4.SrcPort)), netip.AddrPortFrom(d, uint16(l4.DstPort))
	}
	return netip.AddrPortFrom(s, 0), netip.AddrPortFrom(d, 0)
}

// SCTPInit builds an Ethernet/IP/SCTP packet from src to dst carrying an
// INIT chunk (an association's first packet).
func SCTPInit(src, dst netip.AddrPort) []byte {
	init := layers.SCTPInit{
		SCTPChunk:                      layers.SCTPChunk{Type: layers.SCTPChunkTypeInit},
		InitiateTag:                    0x12345678,
		AdvertisedReceiverWindowCredit: 65535,
		OutboundStreams:                10, InboundStreams: 10, InitialTSN: 1,
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, &init); err != nil {
		panic(err)
	}
	chunk := buf.Bytes()
	sctp := &layers.SCTP{SrcPort: layers.SCTPPort(src.Port()), DstPort: layers.SCTPPort(dst.Port())}
	return build(src.Addr(), dst.Addr(), layers.IPProtocolSCTP, sctp, chunk)
}

// WithProto gives an IP packet another protocol number (GRE, ESP: a
// protocol without ports); its checksums are left as they were.
func WithProto(packet []byte, proto byte) []byte {
	out := append([]byte(nil), packet...)
	if out[12] == 0x08 { // IPv4
		out[14+9] = proto
	} else {
		out[14+6] = proto
	}
	return out
}
