package monitor

import (
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/events"
)

// bootTime is the wall clock time of the monotonic clock's zero, which
// the events' bpf_ktime_get_ns counts from.
func bootTime() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Now()
	}
	return time.Now().Add(-time.Duration(ts.Nano()))
}

// Reader reads the datapath's ring buffer into a Hub.
type Reader struct {
	rd   *ringbuf.Reader
	boot time.Time
	// decodeErrors counts records that were not events.
	decodeErrors uint64
}

// NewReader reads events from m (monitor_events).
func NewReader(m *ebpf.Map) (*Reader, error) {
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, err
	}
	return &Reader{rd: rd, boot: bootTime()}, nil
}

// Poll is how often the reader reads the ring buffer when no batch woke
// it: the datapath wakes it only once MON_WAKEUP_BYTES are waiting
// (bpf/cubes/monitor/monitor_maps.h), so an event is read within Poll.
const Poll = 50 * time.Millisecond

// Run hands each event to publish until Close.
func (r *Reader) Run(publish func(events.Event)) {
	var rec ringbuf.Record
	for {
		r.rd.SetDeadline(time.Now().Add(Poll))
		if err := r.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue // everything waiting was read
			}
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return
			}
			slog.Warn("monitor: reading the ring buffer", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		e, err := events.Decode(rec.RawSample, r.boot)
		if err != nil {
			r.decodeErrors++
			continue
		}
		publish(e)
	}
}

// Close stops Run.
func (r *Reader) Close() error { return r.rd.Close() }
