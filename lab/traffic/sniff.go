package traffic

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Seen is the DSCP of a packet a sniffer caught: its own, and for a
// VXLAN packet, the outer header's and the inner packet's.
type Seen struct {
	DSCP      uint8  `json:"dscp"`
	InnerDSCP *uint8 `json:"inner_dscp,omitempty"`
	Port      uint16 `json:"port"` // the (inner) destination port
}

// SniffDSCP reads the packets arriving on dev (a packet socket) until it
// has caught n to TCP or UDP port (inside VXLAN on UDP port vxlanPort,
// when that is not 0), or timeout passes, and returns what it caught.
func SniffDSCP(dev string, port, vxlanPort uint16, n int, timeout time.Duration) ([]Seen, error) {
	ifc, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	proto := uint16(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto<<8|proto>>8))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto<<8 | proto>>8, Ifindex: ifc.Index}); err != nil {
		return nil, fmt.Errorf("bind to %s: %w", dev, err)
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	var out []Seen
	buf := make([]byte, 65536)
	deadline := time.Now().Add(timeout)
	for len(out) < n && time.Now().Before(deadline) {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // the timeout: look at the deadline
		}
		dscp, dport, l4, ok := ipDSCP(buf[14:m])
		if !ok {
			continue
		}
		if vxlanPort == 0 {
			if dport == port {
				out = append(out, Seen{DSCP: dscp, Port: dport})
			}
			continue
		}
		if dport != vxlanPort || len(l4) < 8+8+14 {
			continue
		}
		inner, ip, _, ok := ipDSCP(l4[8+8+14:]) // UDP, VXLAN, the inner Ethernet header
		if ok && ip == port {
			out = append(out, Seen{DSCP: dscp, InnerDSCP: &inner, Port: ip})
		}
	}
	return out, nil
}

// ipDSCP reads an IP packet's DSCP, its TCP or UDP destination port, and
// its L4 bytes.
func ipDSCP(p []byte) (dscp uint8, dport uint16, l4 []byte, ok bool) {
	if len(p) < 1 {
		return 0, 0, nil, false
	}
	var proto uint8
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return 0, 0, nil, false
		}
		dscp, proto, l4 = p[1]>>2, p[9], p[int(p[0]&0x0f)*4:]
	case 6:
		if len(p) < 40 {
			return 0, 0, nil, false
		}
		dscp, proto, l4 = (p[0]<<4|p[1]>>4)>>2, p[6], p[40:]
	default:
		return 0, 0, nil, false
	}
	if (proto != unix.IPPROTO_TCP && proto != unix.IPPROTO_UDP) || len(l4) < 4 {
		return 0, 0, nil, false
	}
	return dscp, binary.BigEndian.Uint16(l4[2:]), l4, true
}
