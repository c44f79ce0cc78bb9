package l2announce

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// listenPair binds one port on two loopback addresses.
func listenPair(t *testing.T, a, b netip.Addr) (*UDP, *UDP) {
	t.Helper()
	for range 20 {
		ua, err := ListenUDP([]netip.Addr{a}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ub, err := ListenUDP([]netip.Addr{b}, ua.Addrs()[0].Port())
		if err == nil {
			return ua, ub
		}
		ua.Close()
	}
	t.Fatal("no port free on both addresses")
	return nil, nil
}

// TestUDPFailover: two memberships in this process, on 127.0.0.2 and
// 127.0.0.3 with the default timings, find each other over real sockets;
// when b stops, a takes b's address over (becameAnnouncer) within about a
// second, and a heartbeat naming b from another address does not keep b
// alive.
func TestUDPFailover(t *testing.T) {
	aAddr, bAddr := addr("127.0.0.2"), addr("127.0.0.3")
	ua, ub := listenPair(t, aAddr, bAddr)
	port := ua.Addrs()[0].Port()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bCtx, stopB := context.WithCancel(ctx)
	defer stopB()
	start := time.Now()
	a, b := NewMembership("a", ua, Options{}), NewMembership("b", ub, Options{})
	for _, m := range []*Membership{a, b} {
		m.OnNode("a", nodeInfo("a", "127.0.0.2"))
		m.OnNode("b", nodeInfo("b", "127.0.0.3"))
		m.OnNode("c", nodeInfo("c", "127.0.0.4")) // never runs
	}
	go ua.Serve(ctx, a.Receive)
	go a.Run(ctx)
	go ub.Serve(bCtx, b.Receive)
	go b.Run(bCtx)

	// An address b wins among a and b.
	ip := netip.MustParseAddr("172.30.100.1")
	for Elect(ip, []string{"a", "b"}) != "b" {
		ip = ip.Next()
	}
	took := make(chan time.Time, 10)
	el := NewElector(a, func(got netip.Addr) {
		if got == ip {
			took <- time.Now()
		}
	})
	// The reconciler's part: elect again at every change.
	go func() {
		for {
			el.Elected(ip, true, nil)
			select {
			case <-ctx.Done():
				return
			case <-a.Changes():
			}
		}
	}()

	deadline := time.Now().Add(3 * time.Second)
	for !slices.Equal(a.Alive(), []string{"a", "b"}) || !slices.Equal(b.Alive(), []string{"a", "b"}) {
		if time.Now().After(deadline) {
			t.Fatalf("alive: a sees %v, b sees %v; want a, b (c never heard)", a.Alive(), b.Alive())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("c found dead, a and b alive, %s after start (grace %s)", time.Since(start).Round(time.Millisecond), DefaultGrace)
	select {
	case <-took:
		t.Fatal("a took b's address over while b is alive")
	case <-time.After(300 * time.Millisecond):
	}

	// A forger (a pod, an outsider) sends heartbeats naming b from
	// another address while b is stopped.
	forger, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr("127.0.0.5"), 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	forged, _ := Heartbeat{Node: "b", Seq: 1 << 60}.Marshal()
	_, refusedBefore := a.Counters()

	stopB()
	stopped := time.Now()
	forgeDone := make(chan struct{})
	go func() {
		defer close(forgeDone)
		for range 10 {
			_, _ = forger.WriteToUDPAddrPort(forged, netip.AddrPortFrom(aAddr, port))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var at time.Time
	select {
	case at = <-took:
	case <-time.After(3 * time.Second):
		t.Fatalf("a never took b's address over; alive %v", a.Alive())
	}
	d := at.Sub(stopped)
	t.Logf("b stopped -> a elected for %s (becameAnnouncer, where the GARP/NA goes out): %s", ip, d.Round(time.Millisecond))
	// b's last heartbeat left up to an interval before it stopped; a
	// finds it dead 3 intervals after that, within a quarter interval.
	if d < 300*time.Millisecond || d > 1200*time.Millisecond {
		t.Errorf("failover took %s, want 400-650 ms (3 missed heartbeats)", d)
	}
	<-forgeDone
	if _, refused := a.Counters(); refused < refusedBefore+5 {
		t.Errorf("forged heartbeats refused: %d, want most of 10", refused-refusedBefore)
	}
	if got := a.Alive(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("with b stopped and forged heartbeats naming it: alive %v, want a alone", got)
	}
}

// TestUDPSendsFromPreferred: with two addresses of a family bound, a
// heartbeat leaves from the one this node's Node object lists.
func TestUDPSendsFromPreferred(t *testing.T) {
	rx, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr("127.0.0.9"), 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	port := rx.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	u, err := ListenUDP([]netip.Addr{addr("127.0.0.7"), addr("127.0.0.8")}, port)
	if err != nil {
		t.Skipf("port %d not free on 127.0.0.7-8: %v", port, err)
	}
	defer u.Close()
	m := NewMembership("a", u, Options{})
	buf := make([]byte, 512)
	for _, c := range []struct {
		self *string
		want string
	}{{nil, "127.0.0.7"}, {ptr("127.0.0.8"), "127.0.0.8"}} {
		if c.self != nil {
			m.OnNode("a", nodeInfo("a", *c.self))
		}
		if err := u.Send(addr("127.0.0.9"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		_, from, err := rx.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if from.Addr().String() != c.want {
			t.Errorf("sent from %s, want %s", from, c.want)
		}
	}
	if err := u.Send(addr("::1"), []byte("x")); err != ErrFamily {
		t.Errorf("to IPv6 with only IPv4 bound: %v, want ErrFamily", err)
	}
}

func ptr[T any](v T) *T { return &v }
