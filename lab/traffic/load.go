package traffic

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Summary is the outcome of a load run.
type Summary struct {
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"per_sec"`
	P50      float64 `json:"p50_us"`
	P90      float64 `json:"p90_us"`
	P99      float64 `json:"p99_us"`
	P999     float64 `json:"p999_us"`
	Max      float64 `json:"max_us"`
	Mean     float64 `json:"mean_us"`
	StdDev   float64 `json:"stddev_us"`
	FirstErr string  `json:"first_err,omitempty"`
}

// Load runs requests back to back (one outstanding at a time) for d and
// summarizes their latency. With c.Persistent this is request/response on
// one connection; without, one new connection per request (connection rate).
func Load(c *Client, d time.Duration) Summary {
	if c.Proto == "tcp" {
		return loadTCP(c, d)
	}
	var lat []float64
	var s Summary
	start := time.Now()
	for time.Since(start) < d {
		r := c.Do(s.Requests)
		s.Requests++
		if r.Err != "" {
			s.Errors++
			if s.FirstErr == "" {
				s.FirstErr = r.Err
			}
			continue
		}
		lat = append(lat, r.Micros)
	}
	c.Close()
	s.Seconds = time.Since(start).Seconds()
	s.PerSec = float64(s.Requests-s.Errors) / s.Seconds
	summarize(&s, lat)
	return s
}

func summarize(s *Summary, lat []float64) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	s.P50, s.P90, s.P99, s.P999, s.Max = q(0.5), q(0.9), q(0.99), q(0.999), lat[len(lat)-1]
	var sum float64
	for _, v := range lat {
		sum += v
	}
	s.Mean = sum / float64(len(lat))
	var sq float64
	for _, v := range lat {
		sq += (v - s.Mean) * (v - s.Mean)
	}
	s.StdDev = math.Sqrt(sq / float64(len(lat)))
}

func (s Summary) String() string {
	return fmt.Sprintf("%d req in %.1fs (%.0f/s), p50 %.1fµs p99 %.1fµs max %.0fµs, %d errors",
		s.Requests, s.Seconds, s.PerSec, s.P50, s.P99, s.Max, s.Errors)
}
