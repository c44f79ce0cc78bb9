package events

import (
	"sync"
	"sync/atomic"
)

// Hub hands every event to every subscriber, never waiting for one: an
// event a subscriber has no room for is lost to it alone, and counted.
type Hub struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
	// lost counts the events subscribers had no room for, all together.
	lost atomic.Uint64
}

// Subscription is one subscriber's events.
type Subscription struct {
	C    <-chan Event
	c    chan Event
	lost atomic.Uint64
	hub  *Hub
}

// NewHub returns a hub without subscribers.
func NewHub() *Hub { return &Hub{subs: map[*Subscription]struct{}{}} }

// Subscribe starts a subscription with room for buffer events.
func (h *Hub) Subscribe(buffer int) *Subscription {
	c := make(chan Event, buffer)
	s := &Subscription{C: c, c: c, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Close ends the subscription (its channel is closed).
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	if _, ok := s.hub.subs[s]; ok {
		delete(s.hub.subs, s)
		close(s.c)
	}
	s.hub.mu.Unlock()
}

// Lost is how many events this subscriber had no room for.
func (s *Subscription) Lost() uint64 { return s.lost.Load() }

// Publish hands e to every subscriber that has room for it.
func (h *Hub) Publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.c <- e:
		default:
			s.lost.Add(1)
			h.lost.Add(1)
		}
	}
}

// Subscribers is how many subscriptions are open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Lost is how many events all subscribers together had no room for.
func (h *Hub) Lost() uint64 { return h.lost.Load() }

// Loss is a line of the stream that tells a client what it missed: events
// it had no room for (Subscriber), and events the datapath could not
// write because the ring buffer was full (Datapath), since the last line.
type Loss struct {
	Subscriber uint64 `json:"lost_by_subscriber,omitempty"`
	Datapath   uint64 `json:"lost_by_datapath,omitempty"`
}
