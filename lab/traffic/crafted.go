package traffic

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Crafted packets: what no socket of a well-behaved client sends (a header
// cut short, a spoofed source, a frame that is not IP), for the tests that
// show how the datapath drops them. Each goes out as the kernel would send
// it, through the namespace's routes (SendIP) or a device (SendFrame).

// SendIP sends IP packets (IPv4 or IPv6, headers included) through the
// namespace's routes, with their own source address: a raw socket that
// writes the header it is given. For IPv4 the kernel sets the total length
// to what is sent and the header checksum.
func SendIP(packets [][]byte) error {
	for i, p := range packets {
		if len(p) < 1 {
			return fmt.Errorf("packet %d: empty", i)
		}
		var family int
		var to unix.Sockaddr
		switch v := p[0] >> 4; {
		case v == 4 && len(p) >= 20:
			family = unix.AF_INET
			to = &unix.SockaddrInet4{Addr: [4]byte(p[16:20])}
		case v == 6 && len(p) >= 40:
			family = unix.AF_INET6
			to = &unix.SockaddrInet6{Addr: [16]byte(p[24:40])}
		default:
			return fmt.Errorf("packet %d: not an IPv4 or IPv6 header", i)
		}
		fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		err = unix.Sendto(fd, p, 0, to)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("packet %d: send: %w", i, err)
		}
	}
	return nil
}

// SendFrame sends Ethernet frames out of device dev as they are (a packet
// socket): its egress programs see them as any frame the kernel sends. It
// returns how many the device's egress dropped (the kernel tells the
// sender: ENOBUFS), which is no error here.
func SendFrame(dev string, frames [][]byte) (dropped int, err error) {
	ifc, err := net.InterfaceByName(dev)
	if err != nil {
		return 0, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	for i, f := range frames {
		if len(f) < 14 {
			return dropped, fmt.Errorf("frame %d: shorter than an Ethernet header", i)
		}
		// The protocol goes as it is into sockaddr_ll: network order.
		to := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6, Protocol: uint16(f[13])<<8 | uint16(f[12])}
		copy(to.Addr[:], f[0:6])
		switch err := unix.Sendto(fd, f, 0, to); {
		case errors.Is(err, unix.ENOBUFS):
			dropped++
		case err != nil:
			return dropped, fmt.Errorf("frame %d: send on %s: %w", i, dev, err)
		}
	}
	return dropped, nil
}
