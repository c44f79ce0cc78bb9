package lb

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// UpsertAll applies many frontends at once, as a full sync does. Frontends
// the cube does not have yet are computed exactly as Upsert computes them,
// but their entries are written with batched map updates, in an order that
// keeps the datapath's invariant across the whole batch: backends, revNAT
// entries and slots first, then master entries (a packet can only find a
// master whose slots and backends are already there).
// Frontends the cube has go through Upsert one by one. If a batch write
// fails (a full map), every new frontend of the call is removed again and
// the error returned: the caller can fall back to one Upsert per Service,
// which says which one does not fit.
func (c *Tables) UpsertAll(items []model.FrontendBackends) error {
	c.mu.Lock()
	p := c.batchBuffer()
	c.pending = p
	fresh := c.fresh[:0] // reused: a full sync calls UpsertAll batch after batch
	defer func() { c.fresh = fresh[:0] }()
	var later []model.FrontendBackends // frontends the maps already have
	var err error
	for _, it := range items {
		// A frontend listed twice is fresh the first time only: the
		// second goes through Upsert after the flush, like any other
		// existing frontend.
		if _, ok := c.frontends[serviceKey(it.Frontend, 0)]; ok {
			later = append(later, it)
			continue
		}
		if err = c.upsert(it); err != nil {
			break // only invalid input fails here: nothing is written yet
		}
		fresh = append(fresh, it.Frontend)
	}
	c.pending = nil
	if err == nil {
		start := time.Now()
		err = p.flush(c.maps)
		c.timeMaps(start)
	}
	c.mu.Unlock()
	if err != nil {
		for _, fe := range fresh {
			_ = c.Delete(fe) // also releases (and deletes) its backends
		}
		return fmt.Errorf("batched sync of %d frontends: %w", len(fresh), err)
	}
	for _, it := range later {
		if err := c.Apply(it); err != nil {
			return err
		}
	}
	return nil
}

// batchBuffer returns the cube's pending-writes buffer, emptied: a full sync
// calls UpsertAll batch after batch, and reusing one buffer saves
// allocating (and collecting) its arrays each time.
func (c *Tables) batchBuffer() *pendingWrites {
	if c.buffer == nil {
		c.buffer = &pendingWrites{}
	}
	c.buffer.backends.reset()
	c.buffer.revNAT.reset()
	c.buffer.slots.reset()
	c.buffer.masters.reset()
	c.buffer.vips.reset()
	return c.buffer
}

// pendingWrites are the entries of a batch, by map and phase.
type pendingWrites struct {
	backends batch[uint32, datapath.Backend]
	revNAT   batch[uint32, datapath.Frontend]
	slots    batch[datapath.ServiceKey, datapath.ServiceValue]
	masters  batch[datapath.ServiceKey, datapath.ServiceValue]
	vips     batch[datapath.Addr, uint8]
}

type batch[K, V any] struct {
	keys []K
	vals []V
}

func (b *batch[K, V]) reset() { b.keys, b.vals = b.keys[:0], b.vals[:0] }

func (b *batch[K, V]) add(k K, v V) {
	b.keys = append(b.keys, k)
	b.vals = append(b.vals, v)
}

func (p *pendingWrites) service(k datapath.ServiceKey, v datapath.ServiceValue) {
	if k.Slot == 0 {
		p.masters.add(k, v)
	} else {
		p.slots.add(k, v)
	}
}

// flush writes the batch in two phases. Nothing can reach a new backend,
// revNAT entry or slot before its frontend's master entry exists (lookups
// start at the master), so those three are written at once, on as many
// CPUs as there are, with the ClusterIP addresses (listed before their
// masters, as Upsert does); then the masters, split in two.
func (p *pendingWrites) flush(m *cube.Maps) error {
	if err := parallel(
		p.backends.writer(m, MapBackends),
		p.revNAT.writer(m, MapRevNAT),
		p.slots.writer(m, MapServices),
		p.vips.writer(m, MapVIPs),
	); err != nil {
		return err
	}
	first, second := p.masters.halves()
	return parallel(first.writer(m, MapServices), second.writer(m, MapServices))
}

// writer returns a function writing the batch into the named map.
func (b batch[K, V]) writer(m *cube.Maps, name string) func() error {
	return func() error {
		_, err := cube.PutBatch(m, name, b.keys, b.vals)
		return err
	}
}

func (b batch[K, V]) halves() (batch[K, V], batch[K, V]) {
	h := len(b.keys) / 2
	return batch[K, V]{b.keys[:h], b.vals[:h]}, batch[K, V]{b.keys[h:], b.vals[h:]}
}

// parallel runs fns at the same time and returns their errors.
func parallel(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, f := range fns {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
