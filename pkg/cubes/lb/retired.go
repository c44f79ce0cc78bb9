package lb

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/model"
)

// sweepCounter is lb_retired's key 0, the number of the conntrack sweep
// last started (no backend has id 0; the others are backend id -> the
// last sweep that found a live flow on it).
const sweepCounter = uint32(0)

// retiredSweeps is how many whole conntrack sweeps must find no flow on a
// retired backend before it is deleted. One would do but for a packet that
// picked the backend from a slot just before the slot went and writes its
// conntrack entry just after a sweep passed its place: the second sweep
// sees that entry.
const retiredSweeps = 2

// Retiring backends: a TCP or SCTP endpoint removed from a Service keeps
// its established connections, as kube-proxy's conntrack keeps them, on
// both paths. (A deleted Service's backends retire too, but on the tc path
// its connections end with it: its frontend and revNAT entries go at once,
// so its packets no longer match a Service nor its replies a translation.)
// On the tc path a connection's packets find their backend through its
// conntrack entry's backend id, so the backend's lb_backends entry stays
// while conntrack has a live flow on it: the backend is retired (no slot
// names it, so no new flow picks it) rather than deleted. Each conntrack
// sweep (ct_gc.c) stamps the retired backends that live flows still use
// with its number, and ExpireRetired deletes those that two whole sweeps
// found unused. A UDP backend is deleted at once: kube-proxy flushes a
// removed endpoint's UDP conntrack entries so that a client's next
// datagram goes to one that is left, and so do we (its next datagram finds
// no backend and is balanced afresh).
//
// Retiring needs the conntrack GC (--conntrack-gc-interval > 0); without
// it (and in hollow agents, which run no datapath) a backend nobody holds
// is deleted at once, as before.

// EnableRetiring makes backends that no frontend holds any more retire
// instead of being deleted at once; call it before the first sync.
func (c *Tables) EnableRetiring() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok, err := cube.Get[uint32, uint32](c.maps, MapRetired, sweepCounter); err != nil {
		return fmt.Errorf("%s: the sweep counter: %w", MapRetired, err)
	} else if !ok {
		// Written once: an earlier agent's count goes on.
		if err := cube.Put(c.maps, MapRetired, sweepCounter, uint32(0)); err != nil {
			return fmt.Errorf("%s: the sweep counter: %w", MapRetired, err)
		}
	}
	if c.retired == nil {
		c.retired = map[uint32]struct{}{}
	}
	return nil
}

// sweeps is the number of the conntrack sweep last started.
func (c *Tables) sweeps() (uint32, error) {
	n, _, err := cube.Get[uint32, uint32](c.maps, MapRetired, sweepCounter)
	return n, err
}

// retire keeps backend b, which no frontend holds any more, for the flows
// that may still run on it, and says whether it did; c.mu is held. A
// backend that cannot be listed (lb_retired full) is not kept: the caller
// deletes it, as without retiring.
func (c *Tables) retire(b *backendEntry) bool {
	if c.retired == nil || model.Proto(c.backends.keyOf(b).Proto) == model.UDP {
		return false
	}
	now, err := c.sweeps()
	if err == nil {
		err = cube.Put(c.maps, MapRetired, b.id, now)
	}
	if err != nil {
		slog.Warn("backend deleted, not retired: its established connections will be balanced afresh",
			"backend", backendOf(c.backends.keyOf(b)), "err", err)
		return false
	}
	c.ops.Updates++
	b.refs = 0
	c.retired[b.id] = struct{}{}
	return true
}

// unretire puts a retired backend back in service (a frontend holds it
// again); c.mu is held.
func (c *Tables) unretire(id uint32) {
	if _, ok := c.retired[id]; !ok {
		return
	}
	delete(c.retired, id)
	removeOrRetry(c, MapRetired, id)
}

// ExpireRetired deletes the retired backends that two whole conntrack
// sweeps have found no flow on, and says how many it deleted.
func (c *Tables) ExpireRetired() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.retired) == 0 {
		return 0, nil
	}
	// The sweep last started may still be running: only those before it
	// are whole.
	now, err := c.sweeps()
	if err != nil {
		return 0, fmt.Errorf("%s: the sweep counter: %w", MapRetired, err)
	}
	deleted := 0
	for id := range c.retired {
		seen, ok, err := cube.Get[uint32, uint32](c.maps, MapRetired, id)
		if err != nil {
			return deleted, fmt.Errorf("%s: backend %d: %w", MapRetired, id, err)
		}
		if !ok { // lost (a retried delete of an earlier life): listed again
			if err := cube.Put(c.maps, MapRetired, id, now); err != nil {
				return deleted, fmt.Errorf("%s: backend %d: %w", MapRetired, id, err)
			}
			continue
		}
		if now < seen+retiredSweeps+1 {
			continue
		}
		if err := c.deleteID(MapBackends, id); err != nil {
			return deleted, fmt.Errorf("%s: retired backend %d: %w", MapBackends, id, err)
		}
		delete(c.retired, id)
		c.backends.remove(id)
		removeOrRetry(c, MapRetired, id)
		deleted++
	}
	return deleted, nil
}

// Retired is the number of retired backends.
func (c *Tables) Retired() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.retired)
}

// RunRetired deletes expired retired backends every interval (the
// conntrack GC's) until ctx ends.
func (c *Tables) RunRetired(ctx context.Context, interval time.Duration) {
	cube.Every(ctx, interval, func() {
		n, err := c.ExpireRetired()
		if err != nil {
			slog.Error("retired backends", "err", err)
		}
		if n > 0 {
			slog.Debug("retired backends deleted: no connection left on them", "deleted", n)
		}
	})
}

// removeRetiredList empties lb_retired but for its sweep counter, after a
// restore: the backends it listed are in no slot, so they are unclaimed
// (Restore), and those the first sync does not claim retire afresh
// (ReleaseUnclaimed).
func (c *Tables) removeRetiredList() error {
	return sweep(c, MapRetired, func(id uint32, _ uint32) bool { return id == sweepCounter })
}
