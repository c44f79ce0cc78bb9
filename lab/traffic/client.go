package traffic

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Result is one request: who answered, or why nobody did.
type Result struct {
	Seq     int     `json:"seq"`
	Backend string  `json:"backend,omitempty"`
	Peer    string  `json:"peer,omitempty"`  // the client's address as the backend saw it
	Local   string  `json:"local,omitempty"` // a failed request's own address: the flow to look for in a capture
	TCP     string  `json:"tcp,omitempty"`   // a failed TCP request's socket as the kernel saw it at the failure
	Err     string  `json:"err,omitempty"`
	Micros  float64 `json:"us"`
}

// Client sends requests to a Service address.
type Client struct {
	Proto   string        // "tcp" or "udp"
	Addr    string        // host:port
	Timeout time.Duration // per request
	// Source, if valid, is the local address to send from.
	Source netip.Addr
	// SourcePort, if set, is the local port of request 0; request i uses
	// SourcePort+i (one known flow each, e.g. to follow a flow's backend).
	SourcePort uint16
	// Persistent keeps one connection (one socket, for UDP) for all
	// requests; otherwise each request opens a new one.
	Persistent bool
	// CloseWithFIN closes TCP connections the normal way (FIN, then
	// TIME_WAIT); otherwise they are reset (see Close).
	CloseWithFIN bool
	// Rate, if set, paces a TCP load to this many requests a second
	// (otherwise back to back).
	Rate float64

	conn  net.Conn
	r     *bufio.Reader
	local string // the address of the last connection opened
	tcp   string // tcpState of the connection that failed
}

// Do sends one request and reads the answer.
func (c *Client) Do(seq int) Result {
	start := time.Now()
	line, err := c.do(seq)
	backend, peer, _ := strings.Cut(line, " ")
	res := Result{Seq: seq, Backend: backend, Peer: peer, Micros: float64(time.Since(start).Nanoseconds()) / 1e3}
	if err != nil {
		res.Err = err.Error()
		res.Local, res.TCP = c.local, c.tcp
		c.Close()
	}
	return res
}

func (c *Client) do(seq int) (string, error) {
	if c.conn == nil {
		c.local = ""
	}
	c.tcp = ""
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	if c.conn == nil {
		d := net.Dialer{Timeout: c.Timeout}
		if c.SourcePort != 0 || c.Source.IsValid() {
			local := netip.AddrPortFrom(c.Source, c.SourcePort+uint16(seq))
			if c.SourcePort == 0 {
				local = netip.AddrPortFrom(c.Source, 0)
			}
			if c.Proto == "udp" {
				d.LocalAddr = net.UDPAddrFromAddrPort(local)
			} else {
				d.LocalAddr = net.TCPAddrFromAddrPort(local)
			}
		}
		conn, err := d.Dial(c.Proto, c.Addr)
		if err != nil {
			return "", err
		}
		c.conn, c.r, c.local = conn, bufio.NewReader(conn), conn.LocalAddr().String()
	}
	if !c.Persistent {
		defer c.Close()
	}
	_ = c.conn.SetDeadline(time.Now().Add(c.Timeout))
	if _, err := c.conn.Write([]byte("?\n")); err != nil {
		c.tcp = tcpState(c.conn)
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.tcp = tcpState(c.conn)
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// Close drops the connection; the next request opens a new one. A TCP
// connection is reset rather than closed, so that a client opening many
// connections never runs out of ports to TIME_WAIT.
func (c *Client) Close() {
	if c.conn == nil {
		return
	}
	if tcp, ok := c.conn.(*net.TCPConn); ok && !c.CloseWithFIN {
		_ = tcp.SetLinger(0)
	}
	_ = c.conn.Close()
	c.conn, c.r = nil, nil
}
