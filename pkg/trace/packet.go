package trace

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Packet is what trace crafts and reads back: a TCP or UDP packet's
// addresses, ports and TCP flags.
type Packet struct {
	Proto    string // "TCP" or "UDP"
	Src, Dst netip.AddrPort
	SYN, ACK bool
	RST      bool
	// ICMP is set when the datapath answered with an ICMP message
	// (unreachable) instead of TCP or UDP.
	ICMP string
}

func (p Packet) String() string {
	if p.ICMP != "" {
		return fmt.Sprintf("%s %s -> %s", p.ICMP, p.Src.Addr(), p.Dst.Addr())
	}
	var flags []string
	for _, f := range []struct {
		on   bool
		name string
	}{{p.SYN, "SYN"}, {p.ACK, "ACK"}, {p.RST, "RST"}} {
		if f.on {
			flags = append(flags, f.name)
		}
	}
	s := fmt.Sprintf("%s %s -> %s", p.Proto, p.Src, p.Dst)
	if len(flags) > 0 {
		s += " [" + strings.Join(flags, ",") + "]"
	}
	return s
}

// bytes builds p as an Ethernet frame with valid checksums.
func (p Packet) bytes() ([]byte, error) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	var ip gopacket.NetworkLayer
	var l3 gopacket.SerializableLayer
	proto := layers.IPProtocolTCP
	if p.Proto == "UDP" {
		proto = layers.IPProtocolUDP
	}
	if p.Src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		v4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: p.Src.Addr().AsSlice(), DstIP: p.Dst.Addr().AsSlice()}
		ip, l3 = v4, v4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: p.Src.Addr().AsSlice(), DstIP: p.Dst.Addr().AsSlice()}
		ip, l3 = v6, v6
	}
	var l4 gopacket.SerializableLayer
	if p.Proto == "UDP" {
		u := &layers.UDP{SrcPort: layers.UDPPort(p.Src.Port()), DstPort: layers.UDPPort(p.Dst.Port())}
		_ = u.SetNetworkLayerForChecksum(ip)
		l4 = u
	} else {
		t := &layers.TCP{SrcPort: layers.TCPPort(p.Src.Port()), DstPort: layers.TCPPort(p.Dst.Port()),
			SYN: p.SYN, ACK: p.ACK, RST: p.RST, Seq: 1000, Window: 64240}
		if p.ACK {
			t.Ack = 1001
		}
		_ = t.SetNetworkLayerForChecksum(ip)
		l4 = t
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, l3, l4, gopacket.Payload("netcube trace"))
	return buf.Bytes(), err
}

// parse reads a frame the datapath put out; dstMAC is its destination
// Ethernet address (the router writes the pod's when it hands a packet to
// a pod).
func parse(frame []byte) (p Packet, dstMAC net.HardwareAddr, err error) {
	pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	eth, _ := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if eth == nil {
		return p, nil, fmt.Errorf("not an Ethernet frame")
	}
	var src, dst netip.Addr
	switch l := pk.NetworkLayer().(type) {
	case *layers.IPv4:
		src, _ = netip.AddrFromSlice(l.SrcIP.To4())
		dst, _ = netip.AddrFromSlice(l.DstIP.To4())
	case *layers.IPv6:
		src, _ = netip.AddrFromSlice(l.SrcIP)
		dst, _ = netip.AddrFromSlice(l.DstIP)
	default:
		return p, nil, fmt.Errorf("not IP")
	}
	switch l := pk.TransportLayer().(type) {
	case *layers.TCP:
		p = Packet{Proto: "TCP", Src: netip.AddrPortFrom(src, uint16(l.SrcPort)), Dst: netip.AddrPortFrom(dst, uint16(l.DstPort)), SYN: l.SYN, ACK: l.ACK, RST: l.RST}
	case *layers.UDP:
		p = Packet{Proto: "UDP", Src: netip.AddrPortFrom(src, uint16(l.SrcPort)), Dst: netip.AddrPortFrom(dst, uint16(l.DstPort))}
	default:
		name := "ICMP"
		if icmp, ok := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ok {
			name = "ICMP " + icmp.TypeCode.String()
		} else if icmp6, ok := pk.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
			name = "ICMPv6 " + icmp6.TypeCode.String()
		}
		p = Packet{ICMP: name, Src: netip.AddrPortFrom(src, 0), Dst: netip.AddrPortFrom(dst, 0)}
	}
	return p, eth.DstMAC, nil
}
