package pkt

import "encoding/binary"

// Fragments splits a whole IPv4 or IPv6 packet (Ethernet frame) into IP
// fragments of at most size bytes of its L4 segment each (size a multiple
// of 8), as a sending stack does: the first carries the L4 header, the
// others only data. The datagram's ID is id: the IPv4 header's (16 bits),
// or the IPv6 fragment header's.
func Fragments(packet []byte, size int, id uint32) [][]byte {
	if size%8 != 0 {
		panic("fragment size must be a multiple of 8")
	}
	eth := packet[:14]
	var out [][]byte
	if packet[12] == 0x08 && packet[13] == 0x00 {
		ihl := int(packet[14]&0x0f) * 4
		hdr, segment := packet[14:14+ihl], packet[14+ihl:]
		for off := 0; off < len(segment); off += size {
			end := min(off+size, len(segment))
			ip := append([]byte(nil), hdr...)
			binary.BigEndian.PutUint16(ip[2:], uint16(ihl+end-off))
			binary.BigEndian.PutUint16(ip[4:], uint16(id))
			flags := uint16(off / 8)
			if end < len(segment) {
				flags |= 0x2000 // more fragments
			}
			binary.BigEndian.PutUint16(ip[6:], flags)
			ip[10], ip[11] = 0, 0
			binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip))
			out = append(out, concat(eth, ip, segment[off:end]))
		}
		return out
	}
	hdr, segment := packet[14:54], packet[54:]
	next := hdr[6]
	for off := 0; off < len(segment); off += size {
		end := min(off+size, len(segment))
		ip := append([]byte(nil), hdr...)
		ip[6] = 44 // a fragment header follows
		binary.BigEndian.PutUint16(ip[4:], uint16(8+end-off))
		fh := make([]byte, 8)
		fh[0] = next
		offM := uint16(off/8) << 3
		if end < len(segment) {
			offM |= 1 // more fragments
		}
		binary.BigEndian.PutUint16(fh[2:], offM)
		binary.BigEndian.PutUint32(fh[4:], id)
		out = append(out, concat(eth, ip, fh, segment[off:end]))
	}
	return out
}

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// WithExtHeader inserts an empty IPv6 extension header of type kind (0
// hop-by-hop, 60 destination options: their options, six bytes of PadN)
// after the IPv6 header of packet, an Ethernet frame, as a sender with
// IPV6_DSTOPTS (or the kernel's MLD, with a hop-by-hop header) does. The
// L4 checksum stays valid: its pseudo-header has no extension headers.
func WithExtHeader(packet []byte, kind uint8) []byte {
	if packet[12] != 0x86 || packet[13] != 0xdd {
		panic("WithExtHeader: not an IPv6 packet")
	}
	ip := append([]byte(nil), packet[14:54]...)
	ext := []byte{ip[6], 0, 1, 4, 0, 0, 0, 0} // next header, length 0 (8 bytes), PadN of 4
	ip[6] = kind
	binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(ip[4:])+8)
	return concat(packet[:14], ip, ext, packet[54:])
}
