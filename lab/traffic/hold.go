package traffic

import (
	"fmt"
	"sync"
	"time"
)

// Holder keeps connections open, each on the backend that first answered
// it: the long-lived flows a fault must not break. A connection is held
// while it still answers, from the same backend.
type Holder struct {
	conns    []*Client
	backends []string
}

// HoldReport is what a Holder found: connections answering from their
// first backend (Held), broken (Lost: an error, or never established),
// answering from another backend (Moved), and the first errors.
type HoldReport struct {
	Event   string   `json:"event"` // "open" or "check"
	Held    int      `json:"held"`
	Lost    int      `json:"lost"`
	Moved   int      `json:"moved"`
	Errors  []string `json:"errors,omitempty"`
	Seconds float64  `json:"seconds"`
}

// maxErrors is how many errors a report quotes.
const maxErrors = 5

// Hold opens n persistent connections like c (16 at a time) and learns
// each one's backend.
func Hold(c Client, n int) (*Holder, HoldReport) {
	h := &Holder{conns: make([]*Client, n), backends: make([]string, n)}
	for i := range h.conns {
		cc := c
		cc.Persistent = true
		cc.conn, cc.r = nil, nil
		h.conns[i] = &cc
	}
	return h, h.each("open", func(i int, r Result) (held, moved bool) {
		h.backends[i] = r.Backend
		return r.Err == "", false
	})
}

// Check sends one request on every connection.
func (h *Holder) Check() HoldReport {
	return h.each("check", func(i int, r Result) (held, moved bool) {
		if r.Err != "" || h.backends[i] == "" {
			return false, false
		}
		return r.Backend == h.backends[i], r.Backend != h.backends[i]
	})
}

// Close closes every connection.
func (h *Holder) Close() {
	for _, c := range h.conns {
		c.Close()
	}
}

func (h *Holder) each(event string, judge func(i int, r Result) (held, moved bool)) HoldReport {
	start := time.Now()
	rep := HoldReport{Event: event}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, c := range h.conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var r Result
			if c.conn == nil && event == "check" {
				r = Result{Seq: i, Err: "not open"}
			} else {
				r = c.Do(i)
			}
			held, moved := judge(i, r)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case held:
				rep.Held++
			case moved:
				rep.Moved++
				if len(rep.Errors) < maxErrors {
					rep.Errors = append(rep.Errors, fmt.Sprintf("connection %d: moved from %s to %s", i, h.backends[i], r.Backend))
				}
			default:
				rep.Lost++
				if len(rep.Errors) < maxErrors {
					rep.Errors = append(rep.Errors, fmt.Sprintf("connection %d: %s", i, r.Err))
				}
			}
		}()
	}
	wg.Wait()
	rep.Seconds = time.Since(start).Seconds()
	return rep
}
