package bgp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawPeer is a BGP "router" written for the fault test, speaking just
// enough of RFC 4271 over raw TCP to misbehave on purpose: it listens on a
// loopback address of the host (the speaker connects out to it, on the
// port it was given) and either never answers the speaker's OPEN
// (rawSilent) or completes the handshake and then sends malformed UPDATEs
// (rawMalformed).
type rawPeer struct {
	t    *testing.T
	mode rawMode
	asn  uint16
	ln   *net.TCPListener
	addr netip.AddrPort

	conns atomic.Int32 // TCP connections accepted
	opens atomic.Int32 // OPENs received from the speaker

	mu       sync.Mutex
	open     []net.Conn
	outcomes map[string][]string // malformed variant -> what the speaker did, per delivery
	wg       sync.WaitGroup
}

type rawMode int

const (
	rawSilent rawMode = iota
	rawMalformed
)

const (
	msgOpen         = 1
	msgUpdate       = 2
	msgNotification = 3
	msgKeepalive    = 4
)

// malformedUpdate is one broken UPDATE body (what follows the 19-byte
// header).
type malformedUpdate struct {
	name string
	body func(nextHop netip.Addr) []byte
}

// malformedUpdates: a path attribute list longer than the message, an
// attribute whose length runs past the list, and an NLRI with a prefix
// length of 33 (an IPv4 prefix cannot have it).
var malformedUpdates = []malformedUpdate{
	{"attribute list length past the message", func(netip.Addr) []byte {
		// Withdrawn length 0; path attributes length 255; then only
		// ORIGIN IGP (4 bytes).
		return []byte{0, 0, 0, 0xff, 0x40, 1, 1, 0}
	}},
	{"attribute length past the list", func(netip.Addr) []byte {
		// ORIGIN claims 32 bytes of value in a 4-byte list.
		return []byte{0, 0, 0, 4, 0x40, 1, 32, 0}
	}},
	{"NLRI prefix length 33", func(nh netip.Addr) []byte {
		attrs := []byte{
			0x40, 1, 1, 0, // ORIGIN IGP
			0x40, 2, 4, 2, 1, 0xfd, 0xea, // AS_PATH: AS_SEQUENCE [65002]
			0x40, 3, 4, // NEXT_HOP
		}
		a4 := nh.As4()
		attrs = append(attrs, a4[:]...)
		b := []byte{0, 0, byte(len(attrs) >> 8), byte(len(attrs))}
		b = append(b, attrs...)
		return append(b, 33, 10, 0, 0, 0, 0) // 33 bits: 5 bytes
	}},
}

// newRawPeer listens on ip (a loopback address) on a port the kernel
// picks, and serves every connection in the background until the test
// ends.
func newRawPeer(t *testing.T, ip netip.Addr, asn uint16, mode rawMode) *rawPeer {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
	if err != nil {
		t.Fatal(err)
	}
	p := &rawPeer{t: t, mode: mode, asn: asn, ln: ln, addr: ln.Addr().(*net.TCPAddr).AddrPort(), outcomes: map[string][]string{}}
	t.Cleanup(p.close)
	p.wg.Add(1)
	go p.accept()
	return p
}

// refusingAddr is an address and port where nothing listens: a connection
// to it is refused (the kernel answers the SYN with a RST).
func refusingAddr(t *testing.T, ip netip.Addr) netip.AddrPort {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
	if err != nil {
		t.Fatal(err)
	}
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	_ = ln.Close()
	return ap
}

func (p *rawPeer) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.open {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *rawPeer) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		n := p.conns.Add(1)
		p.mu.Lock()
		p.open = append(p.open, c)
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer c.Close()
			if err := p.serve(c, int(n-1)); err != nil && !errors.Is(err, net.ErrClosed) {
				p.t.Logf("raw peer %s, connection %d: %v", p.addr, n, err)
			}
		}()
	}
}

// serve is one session: read the speaker's OPEN; a silent peer then only
// reads, a malformed one answers OPEN and KEEPALIVE, waits for the
// speaker's KEEPALIVE, and sends the malformed UPDATEs one after the other
// (starting with the variant after the last connection's) until the
// speaker answers one with a NOTIFICATION or closes.
func (p *rawPeer) serve(c net.Conn, n int) error {
	r := bufio.NewReader(c)
	typ, _, err := readMsg(r)
	if err != nil {
		return err
	}
	if typ != msgOpen {
		return fmt.Errorf("first message of type %d, want OPEN", typ)
	}
	p.opens.Add(1)
	if p.mode == rawSilent {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	if err := writeMsg(c, msgOpen, p.openBody()); err != nil {
		return err
	}
	if err := writeMsg(c, msgKeepalive, nil); err != nil {
		return err
	}
	for typ != msgKeepalive {
		if typ, _, err = readMsg(r); err != nil {
			return fmt.Errorf("waiting for the speaker's KEEPALIVE: %w", err)
		}
		if typ == msgNotification {
			return errors.New("the speaker refused the OPEN")
		}
	}
	for i := range malformedUpdates {
		u := malformedUpdates[(n+i)%len(malformedUpdates)]
		if err := writeMsg(c, msgKeepalive, nil); err != nil {
			return err
		}
		if err := writeMsg(c, msgUpdate, u.body(p.addr.Addr())); err != nil {
			return err
		}
		outcome := p.awaitVerdict(c, r)
		p.mu.Lock()
		p.outcomes[u.name] = append(p.outcomes[u.name], outcome)
		p.mu.Unlock()
		if outcome != "tolerated" {
			return nil
		}
	}
	return nil
}

// awaitVerdict reads what the speaker sends in the 1.5 s after a malformed
// UPDATE (its hold time is 3 s, so silence is not a timeout of ours): a
// NOTIFICATION's code and subcode, the connection's end, or "tolerated".
func (p *rawPeer) awaitVerdict(c net.Conn, r *bufio.Reader) string {
	_ = c.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	for {
		typ, body, err := readMsg(r)
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return "tolerated"
		case err != nil:
			return "closed: " + err.Error()
		case typ == msgNotification && len(body) >= 2:
			return fmt.Sprintf("NOTIFICATION %d/%d", body[0], body[1])
		}
	}
}

// openBody is version 4, the AS, hold time 3 s, the BGP identifier (the
// listening address) and one capability: multiprotocol IPv4 unicast.
func (p *rawPeer) openBody() []byte {
	b := []byte{4, byte(p.asn >> 8), byte(p.asn), 0, 3}
	id := p.addr.Addr().As4()
	b = append(b, id[:]...)
	capMP := []byte{1, 4, 0, 1, 0, 1}                      // capability 1, length 4: AFI 1, SAFI 1
	param := append([]byte{2, byte(len(capMP))}, capMP...) // optional parameter 2: capabilities
	b = append(b, byte(len(param)))
	return append(b, param...)
}

func writeMsg(w io.Writer, typ byte, body []byte) error {
	m := make([]byte, 19, 19+len(body))
	for i := range 16 {
		m[i] = 0xff
	}
	binary.BigEndian.PutUint16(m[16:], uint16(19+len(body)))
	m[18] = typ
	_, err := w.Write(append(m, body...))
	return err
}

func readMsg(r *bufio.Reader) (byte, []byte, error) {
	h := make([]byte, 19)
	if _, err := io.ReadFull(r, h); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint16(h[16:]))
	if n < 19 || n > 4096 {
		return 0, nil, fmt.Errorf("message length %d", n)
	}
	body := make([]byte, n-19)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return h[18], body, nil
}

// outcomesCopy is what the speaker did with each malformed variant.
func (p *rawPeer) outcomesCopy() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for k, v := range p.outcomes {
		out[k] = append([]string(nil), v...)
	}
	return out
}
