package l2announce

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netcube/netcube/pkg/model"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeNet delivers what one membership sends to the others, as their UDP
// sockets would: each address belongs to one membership.
type fakeNet struct {
	at   map[netip.Addr]*Membership
	down map[string]bool // nodes whose heartbeats are lost
	sent []netip.Addr
}

type fakeTransport struct {
	net  *fakeNet
	from netip.Addr
	node string
}

func (t fakeTransport) Send(to netip.Addr, b []byte) error {
	t.net.sent = append(t.net.sent, to)
	if t.from.Is4() != to.Is4() {
		return ErrFamily
	}
	if m := t.net.at[to]; m != nil && !t.net.down[t.node] {
		m.Receive(t.from, b)
	}
	return nil
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func nodeInfo(name string, addrs ...string) *model.NodeInfo {
	n := &model.NodeInfo{Name: name}
	for _, a := range addrs {
		n.Addresses = append(n.Addresses, addr(a))
	}
	return n
}

// cluster makes memberships of nodes a, b, c (10.0.0.1-3, and fd00::1-3)
// knowing one another, on one fake clock.
func cluster(t *testing.T) (*fakeClock, *fakeNet, map[string]*Membership) {
	t.Helper()
	clock := &fakeClock{t: time.Unix(1000, 0)}
	fn := &fakeNet{at: map[netip.Addr]*Membership{}, down: map[string]bool{}}
	ms := map[string]*Membership{}
	names := []string{"a", "b", "c"}
	for i, n := range names {
		v4 := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
		ms[n] = NewMembership(n, fakeTransport{fn, v4, n}, Options{Now: clock.Now})
		fn.at[v4] = ms[n]
	}
	for _, m := range ms {
		for i, n := range names {
			m.OnNode(n, nodeInfo(n, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).String(), "fd00::"+string(rune('1'+i))))
		}
	}
	return clock, fn, ms
}

// step moves the clock by d in heartbeat intervals, every membership
// beating and checking at each.
func step(clock *fakeClock, ms map[string]*Membership, d time.Duration) {
	for end := clock.Now().Add(d); clock.Now().Before(end); {
		clock.Add(DefaultInterval)
		for _, m := range ms {
			m.Beat()
		}
		for _, m := range ms {
			m.Check()
		}
	}
}

func TestHeartbeatWire(t *testing.T) {
	h := Heartbeat{Node: "worker-1.example", Seq: 1<<40 + 7}
	b, err := h.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParseHeartbeat(b); err != nil || got != h {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for _, bad := range [][]byte{nil, []byte("NCHB"), append([]byte("XCHB"), b[4:]...), b[:len(b)-1], append(b, 0)} {
		if _, err := ParseHeartbeat(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := (Heartbeat{Node: string(make([]byte, 254))}).Marshal(); err == nil {
		t.Error("a 254-byte name marshalled")
	}
}

func TestMembershipAlive(t *testing.T) {
	clock, fn, ms := cluster(t)
	a := ms["a"]
	if got := a.Alive(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("in the grace, nothing heard: alive %v, want every known node", got)
	}
	fn.down["c"] = true // c's agent never runs
	step(clock, ms, 800*time.Millisecond)
	if got := a.Alive(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("0.8 s in: alive %v, want every known node", got)
	}
	step(clock, ms, 400*time.Millisecond)
	if got := a.Alive(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after the grace: alive %v, want a, b", got)
	}
	select {
	case <-a.Changes():
	default:
		t.Fatal("no change notified when c was found dead")
	}
	// b dies: dead 3 intervals after its last heartbeat, not before.
	fn.down["b"] = true
	step(clock, ms, 2*DefaultInterval)
	if got := a.Alive(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("2 intervals after b's last heartbeat: alive %v, want a, b", got)
	}
	step(clock, ms, DefaultInterval)
	if got := a.Alive(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("3 intervals after b's last heartbeat: alive %v, want a alone", got)
	}
	<-a.Changes()
	// b comes back: alive at its first heartbeat, notified at once.
	fn.down["b"] = false
	ms["b"].Beat()
	if got := a.Alive(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("b's heartbeat again: alive %v, want a, b", got)
	}
	select {
	case <-a.Changes():
	default:
		t.Fatal("no change notified when b came back")
	}
	// A node deleted is forgotten.
	a.OnNode("b", nil)
	if got := a.Alive(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("b deleted: alive %v", got)
	}
}

// TestMembershipGraceAfterRestart: an agent that starts while its peers
// run counts them alive from the start and throughout, never only itself.
func TestMembershipGraceAfterRestart(t *testing.T) {
	clock, fn, ms := cluster(t)
	step(clock, ms, 2*time.Second)
	v4 := addr("10.0.0.1")
	a := NewMembership("a", fakeTransport{fn, v4, "a"}, Options{Now: clock.Now})
	fn.at[v4] = a
	ms["a"] = a
	for i, n := range []string{"a", "b", "c"} {
		a.OnNode(n, nodeInfo(n, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).String()))
	}
	for range 10 {
		if got := a.Alive(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("%s after the restart: alive %v", clock.Now().Sub(a.start), got)
		}
		step(clock, ms, DefaultInterval)
	}
}

func TestMembershipRefuses(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	m := NewMembership("a", nil, Options{Now: clock.Now})
	m.OnNode("b", nodeInfo("b", "10.0.0.2", "fd00::2"))
	clock.Add(2 * time.Second) // past the grace: b is dead until heard
	m.Check()
	beat := func(node string, seq uint64) []byte {
		b, err := Heartbeat{Node: node, Seq: seq}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name string
		from string
		b    []byte
	}{
		{"b's name from a pod's address", "10.244.1.5", beat("b", 1)},
		{"b's name from another node's address", "10.0.0.3", beat("b", 1)},
		{"an unknown node", "10.0.0.9", beat("z", 1)},
		{"this node's own name", "10.0.0.2", beat("a", 1)},
		{"not a heartbeat", "10.0.0.2", []byte("hello")},
	} {
		m.Receive(addr(c.from), c.b)
		if got := m.Alive(); !slices.Equal(got, []string{"a"}) {
			t.Errorf("%s: alive %v, want a alone", c.name, got)
		}
	}
	if acc, ref := m.Counters(); acc != 0 || ref != 5 {
		t.Errorf("counters %d accepted %d refused, want 0, 5", acc, ref)
	}
	m.Receive(addr("::ffff:10.0.0.2"), beat("b", 2)) // a v4-mapped source is b's IPv4 address
	m.Receive(addr("fd00::2"), beat("b", 3))
	if got := m.Alive(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("b's heartbeat from its own address: alive %v", got)
	}
	if ps := m.Peers(); len(ps) != 1 || ps[0].Seq != 3 || !ps[0].Alive || ps[0].LastHeard == nil {
		t.Errorf("peers %+v", ps)
	}
}

func TestMembershipBeatsEveryAddress(t *testing.T) {
	fn := &fakeNet{at: map[netip.Addr]*Membership{}, down: map[string]bool{}}
	m := NewMembership("a", fakeTransport{fn, addr("10.0.0.1"), "a"}, Options{})
	m.OnNode("a", nodeInfo("a", "10.0.0.1"))
	m.OnNode("b", nodeInfo("b", "10.0.0.2", "fd00::2"))
	m.OnNode("c", nodeInfo("c", "10.0.0.3"))
	m.Beat()
	slices.SortFunc(fn.sent, netip.Addr.Compare)
	if want := []netip.Addr{addr("10.0.0.2"), addr("10.0.0.3"), addr("fd00::2")}; !slices.Equal(fn.sent, want) {
		t.Errorf("sent to %v, want %v (never to itself)", fn.sent, want)
	}
}

// TestSentAndChanged: Sent counts the heartbeats that left (not those
// without a local address of the family), Changed the alive set's changes
// and when the last was (what bench scale-l2 reads of its agents).
func TestSentAndChanged(t *testing.T) {
	clock, fn, ms := cluster(t)
	a := ms["a"]
	if n, at := a.Changed(); n != 2 || !at.Equal(clock.Now()) { // b and c learnt (alive in the grace)
		t.Fatalf("after learning b and c: %d changes, last %v", n, at)
	}
	for _, m := range ms {
		m.Beat()
	}
	clock.Add(2 * DefaultGrace) // past the grace: alive from heartbeats alone
	for _, m := range ms {
		m.Beat()
	}
	a.Check()
	if got := a.Sent(); got != 4 { // 2 beats x 2 peers' IPv4 addresses; their IPv6 ones have no source
		t.Errorf("a sent %d heartbeats, want 4", got)
	}
	fn.down["c"] = true
	clock.Add(DefaultMisses * DefaultInterval)
	ms["b"].Beat()
	ms["c"].Beat() // lost
	b0, _ := a.Changed()
	died := clock.Now()
	a.Check()
	if n, at := a.Changed(); n != b0+1 || !at.Equal(died) {
		t.Errorf("after c died: %d changes (was %d), last %v, want %v", n, b0, at, died)
	}
	if got := a.Alive(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("alive %v", got)
	}
}
