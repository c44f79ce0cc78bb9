package l2announce

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netcube/netcube/pkg/model"
)

// The defaults: a heartbeat every 200 ms, a node dead when none was heard
// for 3 of them (600 ms), every known node counted alive for the first
// second (so a restarting agent, which has heard nobody yet, does not
// elect itself for every address at once).
const (
	DefaultPort     = 4246
	DefaultInterval = 200 * time.Millisecond
	DefaultMisses   = 3
	DefaultGrace    = time.Second
)

// Transport sends a heartbeat to a node's address (UDP, or a test's fake).
// ErrFamily: it has no address of that family to send from (the node's
// other addresses are tried).
type Transport interface {
	Send(to netip.Addr, b []byte) error
}

// ErrFamily: the transport cannot send to an address of that family.
var ErrFamily = errors.New("no local address of that family")

// Options tune a Membership; zero fields take the defaults.
type Options struct {
	Interval time.Duration    // between heartbeats
	Misses   int              // intervals without a heartbeat before a node is dead
	Grace    time.Duration    // after start, every known node is alive
	Now      func() time.Time // the clock (tests)
}

// Membership knows which nodes are alive, from their heartbeats: this
// node always; another while one was heard from it within Misses
// intervals from an address its Node object lists; every known node
// during the Grace after start.
type Membership struct {
	self      string
	tr        Transport
	interval  time.Duration
	deadAfter time.Duration
	grace     time.Duration
	now       func() time.Time
	start     time.Time
	changes   chan struct{}

	mu    sync.Mutex
	peers map[string]*peer
	seq   uint64
	view  *view // the alive nodes as last computed; replaced, never changed
	// Counters, for the status: heartbeats taken, and refused (not a
	// heartbeat, an unknown node, or from an address not the node's).
	accepted, refused uint64
	sent              uint64          // heartbeats sent (one per address of a peer)
	changedAt         time.Time       // when the alive nodes last changed (zero: never)
	gaveUp            map[string]bool // peers whose send failed, logged once
}

type peer struct {
	addrs []netip.Addr // from its Node object
	heard time.Time    // last heartbeat taken; zero: none yet
	seq   uint64
}

// view is a computed alive set: immutable, shared with the elector.
type view struct {
	gen   uint64
	list  []string // sorted, this node included
	alive map[string]bool
}

// NewMembership returns the membership of node self, sending through tr
// (nil: only receiving, as in some tests). The grace starts now.
func NewMembership(self string, tr Transport, o Options) *Membership {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Misses <= 0 {
		o.Misses = DefaultMisses
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Membership{self: self, tr: tr, interval: o.Interval, deadAfter: time.Duration(o.Misses) * o.Interval,
		grace: o.Grace, now: o.Now, start: o.Now(), changes: make(chan struct{}, 1),
		peers: map[string]*peer{}, gaveUp: map[string]bool{}}
	m.view = &view{list: []string{self}, alive: map[string]bool{self: true}}
	return m
}

// Self is this node's name.
func (m *Membership) Self() string { return m.self }

// OnNode learns (or forgets, node nil) a node and its addresses: where
// heartbeats go, and the only sources its heartbeats are taken from.
func (m *Membership) OnNode(name string, node *model.NodeInfo) {
	if name == m.self {
		if p, ok := m.tr.(interface{ Prefer([]netip.Addr) }); ok && node != nil {
			p.Prefer(node.Addresses)
		}
		return
	}
	m.mu.Lock()
	if node == nil {
		delete(m.peers, name)
	} else {
		p := m.peers[name]
		if p == nil {
			p = &peer{}
			m.peers[name] = p
		}
		p.addrs = slices.Clone(node.Addresses)
	}
	m.mu.Unlock()
	m.Check()
}

// OnNodesSynced: nothing to do (a node deleted is delivered as such).
func (m *Membership) OnNodesSynced() {}

// Receive takes a datagram from address from: a heartbeat of a known
// node, from one of its addresses, makes it alive.
func (m *Membership) Receive(from netip.Addr, b []byte) {
	h, err := ParseHeartbeat(b)
	from = from.Unmap()
	m.mu.Lock()
	p := m.peers[h.Node]
	if err != nil || h.Node == m.self || p == nil || !slices.Contains(p.addrs, from) {
		m.refused++
		m.mu.Unlock()
		return
	}
	m.accepted++
	p.heard, p.seq = m.now(), h.Seq
	wasAlive := m.view.alive[h.Node]
	m.mu.Unlock()
	if !wasAlive {
		m.Check()
	}
}

// Beat sends one heartbeat to every address of every other node.
func (m *Membership) Beat() {
	if m.tr == nil {
		return
	}
	m.mu.Lock()
	m.seq++
	msg, err := Heartbeat{Node: m.self, Seq: m.seq}.Marshal()
	if err != nil {
		m.mu.Unlock()
		slog.Error("l2 announce: heartbeat", "err", err)
		return
	}
	type dest struct {
		node string
		addr netip.Addr
	}
	var to []dest
	for name, p := range m.peers {
		for _, a := range p.addrs {
			to = append(to, dest{name, a})
		}
	}
	m.mu.Unlock()
	sent := uint64(0)
	defer func() { m.mu.Lock(); m.sent += sent; m.mu.Unlock() }()
	for _, d := range to {
		err := m.tr.Send(d.addr, msg)
		if err == nil {
			sent++
		}
		if err == nil || errors.Is(err, ErrFamily) {
			continue
		}
		m.mu.Lock()
		first := !m.gaveUp[d.node]
		m.gaveUp[d.node] = true
		m.mu.Unlock()
		if first {
			slog.Warn("l2 announce: heartbeat not sent (logged once per node)", "node", d.node, "addr", d.addr, "err", err)
		}
	}
}

// Check computes the alive nodes now, and notifies (Changes) if they
// changed.
func (m *Membership) Check() {
	now := m.now()
	m.mu.Lock()
	inGrace := now.Sub(m.start) < m.grace
	list := []string{m.self}
	for name, p := range m.peers {
		if inGrace || !p.heard.IsZero() && now.Sub(p.heard) < m.deadAfter {
			list = append(list, name)
		}
	}
	slices.Sort(list)
	if slices.Equal(list, m.view.list) {
		m.mu.Unlock()
		return
	}
	alive := make(map[string]bool, len(list))
	for _, n := range list {
		alive[n] = true
	}
	old := m.view
	m.view = &view{gen: old.gen + 1, list: list, alive: alive}
	m.changedAt = now
	m.mu.Unlock()
	slog.Info("l2 announce: alive nodes changed", "alive", len(list), "joined", missing(list, old.alive), "left", missing(old.list, alive))
	select {
	case m.changes <- struct{}{}:
	default: // one pending notification stands for any number
	}
}

// missing lists the names of l not in set.
func missing(l []string, set map[string]bool) []string {
	var out []string
	for _, n := range l {
		if !set[n] {
			out = append(out, n)
		}
	}
	return out
}

// Alive lists the alive nodes, sorted; this node is always among them.
func (m *Membership) Alive() []string { return slices.Clone(m.current().list) }

// Changes receives a value after the alive nodes changed (one value for
// any number of changes not yet received); one reader.
func (m *Membership) Changes() <-chan struct{} { return m.changes }

func (m *Membership) current() *view {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view
}

// Run sends heartbeats every interval and checks for dead nodes four
// times as often (a node's death is seen within a quarter interval of its
// deadline), until ctx ends.
func (m *Membership) Run(ctx context.Context) {
	beat := time.NewTicker(m.interval)
	defer beat.Stop()
	check := time.NewTicker(m.interval / 4)
	defer check.Stop()
	m.Beat()
	m.Check()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			m.Beat()
		case <-check.C:
			m.Check()
		}
	}
}

// PeerStatus is what the membership knows of another node.
type PeerStatus struct {
	Name      string       `json:"name"`
	Addresses []netip.Addr `json:"addresses"`
	Alive     bool         `json:"alive"`
	// LastHeard: when its last heartbeat was taken (nil: none yet); Seq,
	// that heartbeat's sequence number.
	LastHeard *time.Time `json:"lastHeard,omitempty"`
	Seq       uint64     `json:"seq,omitempty"`
}

// Peers lists the other nodes known, by name.
func (m *Membership) Peers() []PeerStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PeerStatus, 0, len(m.peers))
	for name, p := range m.peers {
		ps := PeerStatus{Name: name, Addresses: slices.Clone(p.addrs), Alive: m.view.alive[name], Seq: p.seq}
		if !p.heard.IsZero() {
			h := p.heard
			ps.LastHeard = &h
		}
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Counters: heartbeats accepted and refused so far.
func (m *Membership) Counters() (accepted, refused uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.accepted, m.refused
}

// Sent is how many heartbeats were sent so far (one per peer address).
func (m *Membership) Sent() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent
}

// Changed is how many times the alive nodes changed so far, and when
// they last did (zero: never): a scale benchmark reads from them whether
// the nodes flap and when every agent saw a node die.
func (m *Membership) Changed() (times uint64, last time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view.gen, m.changedAt
}
