package traffic

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The load generators and the TCP servers use blocking system calls on plain
// file descriptors, not Go's netpoller: one request/response then costs two
// syscalls per side, as with netperf, so the datapath's cost is not hidden
// behind the runtime's scheduling (~25 µs per transaction with net.Conn).
// The single-threaded paths (load client, sequential server) go further and
// use raw syscalls, which keep the Go scheduler out entirely; the concurrent
// server must not (a raw blocking call holds one of the few Ps).

func sockaddr(ap netip.AddrPort) (unix.Sockaddr, int) {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, unix.AF_INET
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}, unix.AF_INET6
}

// dialTCP connects a blocking TCP socket, with timeout on connect, reads
// and writes.
func dialTCP(src netip.Addr, ap netip.AddrPort, timeout time.Duration) (int, error) {
	sa, family := sockaddr(ap)
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if src.IsValid() {
		local, _ := sockaddr(netip.AddrPortFrom(src, 0))
		if err := unix.Bind(fd, local); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("bind %s: %w", src, err)
		}
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv) // also bounds connect()
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := connect(fd, sa, time.Now().Add(timeout)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("connect %s: %w", ap, err)
	}
	return fd, nil
}

// connect is a blocking connect that survives signals: an interrupted
// connect goes on in the kernel, and calling it again waits for it
// (EALREADY while in progress, EISCONN once established), until deadline
// (each call may wait SO_SNDTIMEO again: signals must not extend it).
func connect(fd int, sa unix.Sockaddr, deadline time.Time) error {
	err := unix.Connect(fd, sa)
	for errors.Is(err, unix.EINTR) || errors.Is(err, unix.EALREADY) {
		if time.Now().After(deadline) {
			return unix.ETIMEDOUT
		}
		err = unix.Connect(fd, sa)
		if errors.Is(err, unix.EISCONN) {
			return nil
		}
	}
	return err
}

// rawRead and rawWrite are read and write that bypass the Go scheduler,
// retried when a signal interrupts them until deadline: the runtime's
// preemption signals would otherwise restart the socket's timeout
// (SO_RCVTIMEO) for ever on an answer that never comes. A zero deadline:
// none (a server waiting for its client's next request).
func rawRead(fd int, b []byte, deadline time.Time) (int, error) {
	return rawIO(unix.SYS_READ, fd, b, deadline)
}
func rawWrite(fd int, b []byte, deadline time.Time) (int, error) {
	return rawIO(unix.SYS_WRITE, fd, b, deadline)
}

func rawIO(sysno uintptr, fd int, b []byte, deadline time.Time) (int, error) {
	for {
		n, _, e := unix.RawSyscall(sysno, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == unix.EINTR {
			if !deadline.IsZero() && time.Now().After(deadline) {
				return 0, unix.ETIMEDOUT
			}
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

// read and write retry when a signal interrupts them.
func read(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

func write(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Write(fd, b)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// resetClose closes with a RST (SO_LINGER 0): a client opening thousands of
// connections a second must not run out of ports to TIME_WAIT.
func resetClose(fd int) {
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	unix.Close(fd)
}

var request = []byte("?\n")

// transact sends one request and reads one answer line, by deadline.
func transact(fd int, buf []byte, deadline time.Time) error {
	if _, err := rawWrite(fd, request, deadline); err != nil {
		return err
	}
	for n := 0; ; {
		m, err := rawRead(fd, buf[n:], deadline)
		if err != nil {
			return err
		}
		if m == 0 {
			return errors.New("connection closed")
		}
		n += m
		if bytes.IndexByte(buf[:n], '\n') >= 0 {
			return nil
		}
		if n == len(buf) {
			return errors.New("answer too long")
		}
	}
}

// loadTCP is Load for TCP.
func loadTCP(c *Client, d time.Duration) Summary {
	var s Summary
	var lat []float64
	ap, err := netip.ParseAddrPort(c.Addr)
	if err != nil {
		return Summary{Errors: 1, FirstErr: err.Error()}
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	buf := make([]byte, 256)
	fd := -1
	fail := func(err error) {
		s.Errors++
		if s.FirstErr == "" {
			s.FirstErr = err.Error()
		}
		if fd >= 0 {
			resetClose(fd)
			fd = -1
		}
	}
	start := time.Now()
	for time.Since(start) < d {
		if c.Rate > 0 {
			if wait := time.Until(start.Add(time.Duration(float64(s.Requests) / c.Rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
		}
		t0 := time.Now()
		s.Requests++
		if fd < 0 {
			if fd, err = dialTCP(c.Source, ap, timeout); err != nil {
				fail(err)
				continue
			}
		}
		if err := transact(fd, buf, t0.Add(timeout)); err != nil {
			fail(err)
			continue
		}
		if !c.Persistent {
			resetClose(fd)
			fd = -1
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	if fd >= 0 {
		unix.Close(fd)
	}
	s.Seconds = time.Since(start).Seconds()
	s.PerSec = float64(s.Requests-s.Errors) / s.Seconds
	summarize(&s, lat)
	return s
}

// listenTCP listens on [::]:port, for both families.
func listenTCP(port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet6{Port: port}); err != nil {
		return -1, fmt.Errorf("bind TCP port %d: %w", port, err)
	}
	return fd, unix.Listen(fd, 4096)
}

// serveTCP answers every line on every connection with reply, one
// goroutine per connection.
func serveTCP(port int, name string) error {
	fd, err := listenTCP(port)
	if err != nil {
		return err
	}
	for {
		conn, peer, err := unix.Accept4(fd, unix.SOCK_CLOEXEC)
		if err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ECONNABORTED) {
				continue
			}
			return err
		}
		_ = unix.SetsockoptInt(conn, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		go answerLines(conn, answer(name, sockaddrIP(peer)))
	}
}

// ServeSequential answers TCP connections one at a time from this one
// thread, with raw syscalls: the benchmark's request/response server.
func ServeSequential(name string, port int) error {
	fd, err := listenTCP(port)
	if err != nil {
		return err
	}
	reply := []byte(name + "\n")
	for {
		conn, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
		if e != 0 {
			if e == unix.EINTR || e == unix.ECONNABORTED {
				continue
			}
			return e
		}
		_ = unix.SetsockoptInt(int(conn), unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		answerLinesWith(int(conn), reply,
			func(fd int, b []byte) (int, error) { return rawRead(fd, b, time.Time{}) },
			func(fd int, b []byte) (int, error) { return rawWrite(fd, b, time.Time{}) })
	}
}

func answerLines(fd int, reply []byte) { answerLinesWith(fd, reply, read, write) }

func answerLinesWith(fd int, reply []byte, read, write func(int, []byte) (int, error)) {
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	for {
		n, err := read(fd, buf)
		if err != nil || n == 0 {
			return
		}
		for range bytes.Count(buf[:n], []byte{'\n'}) {
			if _, err := write(fd, reply); err != nil {
				return
			}
		}
	}
}

// sockaddrIP is the address of a peer as accept returned it.
func sockaddrIP(sa unix.Sockaddr) netip.Addr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(a.Addr)
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(a.Addr).Unmap()
	}
	return netip.Addr{}
}
