package pkt

import (
	"net"
	"net/netip"

	"github.com/gopacket/gopacket/layers"
)

// ARP is an Ethernet ARP request (reply false: from src asking who has
// target, broadcast) or reply (from the owner of src to target's MAC), as
// a reference encoder writes it, without Ethernet padding (a veth sends
// none).
func ARP(reply bool, srcMAC net.HardwareAddr, src netip.Addr, dstMAC net.HardwareAddr, dst netip.Addr) []byte {
	eth := &layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: layers.EthernetTypeARP}
	a := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: layers.ARPRequest, SourceHwAddress: srcMAC, SourceProtAddress: src.AsSlice(),
		DstHwAddress: make(net.HardwareAddr, 6), DstProtAddress: dst.AsSlice()}
	if reply {
		a.Operation, a.DstHwAddress = layers.ARPReply, dstMAC
	} else {
		eth.DstMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	return serialize(eth, a)[:14+28]
}

// NeighborSolicitation is src asking (to target's solicited-node multicast
// address, hop limit 255, with its link-layer address option) for target's
// MAC, as RFC 4861 4.3 has it.
func NeighborSolicitation(srcMAC net.HardwareAddr, src, target netip.Addr) []byte {
	t := target.As16()
	group := netip.AddrFrom16([16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: t[13], 14: t[14], 15: t[15]})
	eth := &layers.Ethernet{SrcMAC: srcMAC, DstMAC: net.HardwareAddr{0x33, 0x33, 0xff, t[13], t[14], t[15]}, EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: src.AsSlice(), DstIP: group.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}
	_ = icmp.SetNetworkLayerForChecksum(ip)
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: target.AsSlice(),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: srcMAC}}}
	return serialize(eth, ip, icmp, ns)
}

// NeighborAdvertisement is the owner of target (MAC ownerMAC) answering
// the solicitation of asker: solicited, not overriding (an anycast or
// proxy answer, RFC 4861 7.2.7), with its link-layer address option.
func NeighborAdvertisement(ownerMAC net.HardwareAddr, target netip.Addr, askerMAC net.HardwareAddr, asker netip.Addr) []byte {
	eth := &layers.Ethernet{SrcMAC: ownerMAC, DstMAC: askerMAC, EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: target.AsSlice(), DstIP: asker.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
	_ = icmp.SetNetworkLayerForChecksum(ip)
	na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x40, TargetAddress: target.AsSlice(),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: ownerMAC}}}
	return serialize(eth, ip, icmp, na)
}
