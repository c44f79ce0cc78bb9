package pkt

import (
	"encoding/binary"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// SYNWithMSS builds a TCP SYN from src to dst announcing mss, as a client's
// stack opens a connection.
func SYNWithMSS(src, dst netip.AddrPort, mss uint16) []byte {
	tcp := &layers.TCP{
		SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), SYN: true, Seq: 1000, Window: 64240,
		Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: binary.BigEndian.AppendUint16(nil, mss)}},
	}
	return build(src.Addr(), dst.Addr(), layers.IPProtocolTCP, tcp, nil)
}

// WithMSS is a TCP packet with its MSS option set to mss, its checksum
// recomputed.
func WithMSS(packet []byte, mss uint16) []byte {
	return rebuild(packet, func(l gopacket.Layer) {
		if tcp, ok := l.(*layers.TCP); ok {
			for i, o := range tcp.Options {
				if o.OptionType == layers.TCPOptionKindMSS {
					tcp.Options[i].OptionData = binary.BigEndian.AppendUint16(nil, mss)
				}
			}
		}
	})
}

// WithDSR is packet as netcube's DSR sends it to the backend's node: the
// frontend written right after the base IP header, as an IPv4 option
// (type 0x9e, 8 bytes: port, address) or an IPv6 destination options
// header (option type 0x1e, 20 bytes: port, 2 bytes of padding, address).
// The L4 checksum stays as it is: neither changes its pseudo-header.
func WithDSR(packet []byte, frontend netip.AddrPort) []byte {
	eth, ip := packet[:14], packet[14:]
	var out []byte
	if frontend.Addr().Is4() {
		opt := []byte{0x9e, 8, 0, 0}
		opt = binary.BigEndian.AppendUint16(opt[:2], frontend.Port())
		opt = append(opt, frontend.Addr().AsSlice()...)
		h := append(append([]byte(nil), ip[:20]...), opt...)
		h[0] = 0x47
		binary.BigEndian.PutUint16(h[2:], binary.BigEndian.Uint16(h[2:])+8)
		h[10], h[11] = 0, 0
		binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
		out = append(append(append([]byte(nil), eth...), h...), ip[20:]...)
	} else {
		ext := []byte{ip[6], 2, 0x1e, 20}
		ext = binary.BigEndian.AppendUint16(ext, frontend.Port())
		ext = append(ext, 0, 0)
		ext = append(ext, frontend.Addr().AsSlice()...)
		h := append([]byte(nil), ip[:40]...)
		binary.BigEndian.PutUint16(h[4:], binary.BigEndian.Uint16(h[4:])+24)
		h[6] = 60 // destination options
		out = append(append(append(append([]byte(nil), eth...), h...), ext...), ip[40:]...)
	}
	return out
}
