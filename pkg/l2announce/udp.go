package l2announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// UDP carries heartbeats: a socket bound to each of the node's own
// addresses on the port. A heartbeat to an address leaves from the first
// own address of its family, so that it carries a source the receiver's
// view of this node's Node object lists.
type UDP struct {
	conns []*net.UDPConn
	once  sync.Once

	mu     sync.Mutex
	prefer []netip.Addr // this node's Node object's addresses: sent from first
}

// Prefer makes heartbeats leave from one of addrs where one of them is
// bound (the addresses this node's Node object lists, which the other
// nodes take heartbeats from).
func (u *UDP) Prefer(addrs []netip.Addr) {
	u.mu.Lock()
	u.prefer = slices.Clone(addrs)
	u.mu.Unlock()
}

// ListenUDP binds port on each of addrs (the node's uplink addresses).
func ListenUDP(addrs []netip.Addr, port uint16) (*UDP, error) {
	u := &UDP{}
	for _, a := range addrs {
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a.Unmap(), port)))
		if err != nil {
			u.Close()
			return nil, fmt.Errorf("l2 announce heartbeats on %s: %w", netip.AddrPortFrom(a, port), err)
		}
		u.conns = append(u.conns, c)
	}
	if len(u.conns) == 0 {
		return nil, errors.New("l2 announce heartbeats: the node has no address to send from")
	}
	return u, nil
}

// Addrs are the addresses bound, port included.
func (u *UDP) Addrs() []netip.AddrPort {
	var out []netip.AddrPort
	for _, c := range u.conns {
		out = append(out, c.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	return out
}

// Send sends b to the heartbeat port of address to.
func (u *UDP) Send(to netip.Addr, b []byte) error {
	to = to.Unmap()
	u.mu.Lock()
	prefer := u.prefer
	u.mu.Unlock()
	var from *net.UDPConn
	for _, c := range u.conns {
		local := c.LocalAddr().(*net.UDPAddr).AddrPort()
		if local.Addr().Is4() != to.Is4() {
			continue
		}
		if from == nil {
			from = c
		}
		if slices.Contains(prefer, local.Addr()) {
			from = c
			break
		}
	}
	if from == nil {
		return ErrFamily
	}
	_, err := from.WriteToUDPAddrPort(b, netip.AddrPortFrom(to, from.LocalAddr().(*net.UDPAddr).AddrPort().Port()))
	return err
}

// Serve hands every datagram received, with its source address, to recv,
// until ctx ends (it then closes the sockets).
func (u *UDP) Serve(ctx context.Context, recv func(from netip.Addr, b []byte)) {
	var wg sync.WaitGroup
	for _, c := range u.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 512)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
						return
					}
					// Not fatal: a socket that stopped reading would see
					// every node dead, and elect this one for everything.
					slog.Error("l2 announce: heartbeat socket", "addr", c.LocalAddr(), "err", err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				recv(from.Addr(), buf[:n])
			}
		}()
	}
	go func() { <-ctx.Done(); u.Close() }()
	wg.Wait()
}

// Close closes the sockets.
func (u *UDP) Close() {
	u.once.Do(func() {
		for _, c := range u.conns {
			_ = c.Close()
		}
	})
}
