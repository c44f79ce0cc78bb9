package lb

import (
	"errors"
	"fmt"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// UpsertAll applies many frontends at once, as a full sync does. Frontends
// the cube does not have yet are computed exactly as Upsert computes them,
// but their entries are written with batched map updates, in an order that
// keeps the datapath's invariant across the whole batch: every backend, then
// every revNAT entry, then every slot, then every master entry (a packet
// can only find a master whose slots and backends are already there).
// Frontends the cube has go through Upsert one by one. If a batch write
// fails (a full map), every new frontend of the call is removed again and
// the error returned: the caller can fall back to one Upsert per Service,
// which says which one does not fit.
func (c *Cube) UpsertAll(items []model.FrontendBackends) error {
	c.mu.Lock()
	var fresh []model.FrontendBackends
	var existing []model.FrontendBackends
	seen := make(map[model.Frontend]bool, len(items))
	for _, it := range items {
		if _, ok := c.frontends[it.Frontend]; ok || seen[it.Frontend] {
			existing = append(existing, it)
			continue
		}
		seen[it.Frontend] = true
		fresh = append(fresh, it)
	}
	c.mu.Unlock()

	if err := c.upsertFresh(fresh); err != nil {
		return err
	}
	for _, it := range existing {
		if err := c.Upsert(it.Frontend, it.Backends); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cube) upsertFresh(items []model.FrontendBackends) error {
	if len(items) == 0 {
		return nil
	}
	c.mu.Lock()
	c.pending = &pendingWrites{}
	c.mu.Unlock()
	var err error
	for _, it := range items {
		if err = c.Upsert(it.Frontend, it.Backends); err != nil {
			break // only invalid input fails here: nothing is written yet
		}
	}
	c.mu.Lock()
	p := c.pending
	c.pending = nil
	if err == nil {
		err = p.flush(c.maps)
	}
	c.mu.Unlock()
	if err != nil {
		for _, it := range items {
			_ = c.Delete(it.Frontend) // also releases (and deletes) its backends
		}
		return fmt.Errorf("batched sync of %d frontends: %w", len(items), err)
	}
	return nil
}

// pendingWrites are the entries of a batch, by map and phase.
type pendingWrites struct {
	backends batch[uint32, datapath.Backend]
	revNAT   batch[uint32, datapath.Frontend]
	slots    batch[datapath.ServiceKey, datapath.ServiceValue]
	masters  batch[datapath.ServiceKey, datapath.ServiceValue]
}

type batch[K, V any] struct {
	keys []K
	vals []V
}

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

// flush writes the phases in order, stopping at the first failure. Backends
// and revNAT entries are independent (nothing points at either yet), so
// they are written at the same time, on two CPUs.
func (p *pendingWrites) flush(m *datapath.Maps) error {
	revNATDone := make(chan error, 1)
	go func() {
		_, err := datapath.PutBatch(m, datapath.MapRevNAT, p.revNAT.keys, p.revNAT.vals)
		revNATDone <- err
	}()
	_, err := datapath.PutBatch(m, datapath.MapBackends, p.backends.keys, p.backends.vals)
	if err := errors.Join(err, <-revNATDone); err != nil {
		return err
	}
	if _, err := datapath.PutBatch(m, datapath.MapServices, p.slots.keys, p.slots.vals); err != nil {
		return err
	}
	_, err = datapath.PutBatch(m, datapath.MapServices, p.masters.keys, p.masters.vals)
	return err
}
