package lb

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Cube holds what has been written to the LB maps. Its methods are safe for
// concurrent use (the reconciler writes, metrics read).
type Cube struct {
	mu   sync.Mutex
	maps *datapath.Maps
	// Keys are the maps' own layouts (datapath.ServiceKey with slot 0,
	// datapath.Backend): 20-24 bytes without pointers, where model types
	// take 32-40 with one. At 100,000 Services these indexes are a quarter
	// of the agent's memory, and maps without pointers are not scanned by
	// the garbage collector.
	frontends map[datapath.ServiceKey]*frontend
	backends  map[datapath.Backend]backendRef
	byID      map[uint32]datapath.Backend
	// IDs only grow: a conntrack entry naming a freed id must never find a
	// different backend or frontend under it.
	nextBackendID, nextRevNATID uint32
	ops                         Ops
	// pending, while UpsertAll runs, collects writes instead of making
	// them, to be flushed in batches; buffer is kept for the next call.
	pending, buffer *pendingWrites
	// onLeft, if set, is told which backends left a frontend (after the
	// maps no longer offer them), with c.mu held: it must not call back.
	onLeft func(fe model.Frontend, revNATID uint32, left []model.Backend)
	// ranges: the loadBalancerSourceRanges of the frontends that have
	// some, by revNAT id.
	ranges map[uint32][]netip.Prefix
	// draining: by revNAT id, for the frontends that have some, the
	// backends of terminating endpoints, held (one reference each) in
	// lb_backends but in no slot, so established flows keep them. (A side
	// map: most frontends have none, and a field would cost every one.)
	draining map[uint32][]uint32
	// unclaimed: backends a restore found in no slot, kept for the first
	// sync to claim as draining (ReleaseUnclaimed deletes the rest).
	unclaimed []uint32
}

// ReleaseUnclaimed deletes the backends that a restore kept and the first
// sync did not claim (no frontend holds them); call it once, after that
// sync.
func (c *Cube) ReleaseUnclaimed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.unclaimed {
		k, ok := c.byID[id]
		if !ok || c.backends[k].refs > 0 {
			continue
		}
		if err := c.deleteID(datapath.MapBackends, id); err != nil {
			return err
		}
		delete(c.byID, id)
		delete(c.backends, k)
	}
	c.unclaimed = nil
	return nil
}

// OnBackendsLeft sets f to be told, from now on, which backends leave a
// frontend (removed from it, or the frontend deleted). f is called with
// the cube locked and must return quickly.
func (c *Cube) OnBackendsLeft(f func(fe model.Frontend, revNATID uint32, left []model.Backend)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onLeft = f
}

// tellLeft reports ids leaving fe to onLeft; c.mu is held.
func (c *Cube) tellLeft(fe model.Frontend, revNATID uint32, ids []uint32) {
	if c.onLeft == nil || len(ids) == 0 {
		return
	}
	left := make([]model.Backend, 0, len(ids))
	for _, id := range ids {
		if k, ok := c.byID[id]; ok {
			left = append(left, backendOf(k))
		}
	}
	c.onLeft(fe, revNATID, left)
}

type frontend struct {
	revNATID uint32
	flags    model.FrontendFlags
	affinity uint32   // seconds; 0: none
	slots    []uint32 // backend id of slot i+1
}

// backendRef is a backend's id and how many slots point at it.
type backendRef struct {
	id, refs uint32
}

// Ops counts map writes and deletes, for tests, benchmarks and metrics.
type Ops struct{ Updates, Deletes int }

// New returns a cube writing to maps, assumed empty; call Restore instead
// when the maps may hold an earlier agent's state.
func New(maps *datapath.Maps) *Cube {
	return &Cube{
		maps:          maps,
		frontends:     map[datapath.ServiceKey]*frontend{},
		backends:      map[datapath.Backend]backendRef{},
		byID:          map[uint32]datapath.Backend{},
		nextBackendID: 1,
		nextRevNATID:  1,
		ranges:        map[uint32][]netip.Prefix{},
		draining:      map[uint32][]uint32{},
	}
}

// Ops returns the map operations done so far.
func (c *Cube) Ops() Ops {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// Entries returns how many entries the cube keeps in each of its maps.
func (c *Cube) Entries() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	services := 0
	for _, f := range c.frontends {
		services += 1 + len(f.slots)
	}
	return map[string]int{
		datapath.MapServices: services,
		datapath.MapBackends: len(c.backends),
		datapath.MapRevNAT:   len(c.frontends),
	}
}

// Frontends lists the frontends present in the maps.
func (c *Cube) Frontends() []model.Frontend {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]model.Frontend, 0, len(c.frontends))
	for k := range c.frontends {
		out = append(out, frontendOf(k))
	}
	return out
}

// Backends returns the backends of an applied frontend, in slot order.
func (c *Cube) Backends(fe model.Frontend) []model.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.frontends[serviceKey(fe, 0)]
	if f == nil {
		return nil
	}
	out := make([]model.Backend, len(f.slots))
	for i, id := range f.slots {
		out[i] = backendOf(c.byID[id])
	}
	return out
}

// Upsert makes fe load-balance over backends (none: fe rejects). Only the
// slots that change are written: adding or removing one backend costs O(1)
// map operations whatever the size of the Service or of the cluster.
func (c *Cube) Upsert(fe model.Frontend, backends []model.Backend) error {
	return c.Apply(model.FrontendBackends{Frontend: fe, Backends: backends})
}

// Apply is Upsert with the frontend's options (flags).
func (c *Cube) Apply(fb model.FrontendBackends) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.upsert(fb)
}

// upsert is Apply with c.mu held.
func (c *Cube) upsert(fb model.FrontendBackends) error {
	fe, backends := fb.Frontend, fb.Backends
	if !fe.Addr.IsValid() || fe.Port == 0 {
		return fmt.Errorf("invalid frontend %s", fe)
	}
	key := serviceKey(fe, 0)
	f, exists := c.frontends[key]
	if !exists {
		f = &frontend{}
	}

	// 1. Backends first: every slot written below must point at one.
	want, acquired, err := c.acquireAll(fe.Proto, backends, f.slots)
	if err != nil {
		return fmt.Errorf("frontend %s: %w", fe, err)
	}
	if !exists {
		f.revNATID = c.nextRevNATID
		rn := datapath.Frontend{Addr: datapath.AddrFrom(fe.Addr), Port: datapath.Port(fe.Port)}
		if err := c.writeRevNAT(f.revNATID, rn); err != nil {
			c.releaseAll(acquired)
			return fmt.Errorf("frontend %s: %w", fe, err)
		}
		c.nextRevNATID++
	}

	// 2. The new slot list: kept backends stay where they are; a new backend
	// takes the place of a removed one, else goes to the end; a hole left by
	// a removed backend is filled with the last slot.
	next, removed := nextSlots(f.slots, want)
	old := f.slots

	// Backends joining a Service with affinity may be stuck to from now on.
	if err := c.writeAffinityMatch(f.revNATID, fb.Affinity, next, f.affinity, old); err != nil {
		c.releaseAll(acquired)
		if !exists {
			_ = c.deleteID(datapath.MapRevNAT, f.revNATID)
		}
		return fmt.Errorf("frontend %s: %w", fe, err)
	}

	// 3. Slots beyond the old count first (the only writes that can hit a
	// full map), then in-place changes, then the master entry, then the
	// slots no longer counted. Readers holding the old count see valid
	// backends throughout: removed backends are released only at the end.
	for i := len(old); i < len(next); i++ {
		if err := c.writeSlot(fe, i, next[i]); err != nil {
			for j := len(old); j < i; j++ {
				_ = c.deleteSlot(fe, j)
			}
			c.releaseAll(acquired)
			if !exists {
				_ = c.deleteID(datapath.MapRevNAT, f.revNATID)
			}
			return fmt.Errorf("frontend %s: %w", fe, err)
		}
	}
	for i := 0; i < min(len(old), len(next)); i++ {
		if old[i] != next[i] {
			if err := c.writeSlot(fe, i, next[i]); err != nil {
				return fmt.Errorf("frontend %s: %w", fe, err)
			}
		}
	}
	// The Maglev table, rebuilt when the backends change, is in place
	// before the master entry can send packets to it.
	switch {
	case isMaglev(fb.Flags) && (!exists || !isMaglev(f.flags) || !sameIDs(old, next)):
		if err := c.writeMaglevTable(f.revNATID, next); err != nil {
			if !exists {
				c.abandon(fe, f.revNATID, len(next), acquired)
			}
			return fmt.Errorf("frontend %s: %w", fe, err)
		}
	case !isMaglev(fb.Flags) && exists && isMaglev(f.flags):
		defer c.deleteMaglevTable(f.revNATID) // once the master no longer uses it
	}
	// Source ranges are allowed before the master may check them.
	var ranges []netip.Prefix
	if fb.Flags&model.SourceRanges != 0 {
		ranges = fb.SourceRanges
		if err := c.writeRanges(f.revNATID, ranges); err != nil {
			if !exists {
				c.abandon(fe, f.revNATID, len(next), acquired)
			}
			return fmt.Errorf("frontend %s: %w", fe, err)
		}
	}
	if !exists || len(old) != len(next) || f.flags != fb.Flags || f.affinity != fb.Affinity {
		master := datapath.ServiceValue{Count: uint16(len(next)), RevNatId: f.revNATID, Flags: uint16(fb.Flags), BackendId: fb.Affinity}
		if err := c.writeService(serviceKey(fe, 0), master); err != nil {
			if !exists {
				c.abandon(fe, f.revNATID, len(next), acquired)
			}
			return fmt.Errorf("frontend %s: %w", fe, err)
		}
	}
	prevAffinity := f.affinity
	f.slots, f.flags, f.affinity = next, fb.Flags, fb.Affinity
	c.frontends[key] = f
	c.keepRanges(f.revNATID, ranges) // the master no longer needs the others
	// Backends that left are no longer stuck to.
	c.deleteAffinityMatch(f.revNATID, prevAffinity, old, fb.Affinity, next)
	c.tellLeft(fe, f.revNATID, removed)
	for i := len(next); i < len(old); i++ {
		if err := c.deleteSlot(fe, i); err != nil {
			return err
		}
	}
	// Hold the draining backends before releasing anything, so one moving
	// from a slot to draining never leaves the map.
	draining := c.holdDraining(fe.Proto, fb.Draining, next)
	c.releaseAll(removed)
	c.releaseAll(c.draining[f.revNATID])
	if len(draining) > 0 {
		c.draining[f.revNATID] = draining
	} else {
		delete(c.draining, f.revNATID)
	}
	return nil
}

// holdDraining takes a reference on each draining backend not in a slot
// (writing it if the map does not have it) and returns their ids. Keeping
// established flows is best effort: a backend that does not fit is left
// out, and its flows are balanced again.
func (c *Cube) holdDraining(proto model.Proto, bs []model.Backend, slots []uint32) []uint32 {
	var ids []uint32
	inSlots := newSmallSet(slots)
	for _, b := range bs {
		k := backendKey(b, proto)
		if have, ok := c.backends[k]; ok && (inSlots.has(have.id) || slices.Contains(ids, have.id)) {
			continue
		}
		id, err := c.acquire(k)
		if err != nil {
			continue
		}
		ids = append(ids, id)
	}
	return ids
}

// abandon undoes what upsert wrote for a new frontend that could not be
// completed: its slots, its backend references, its revNAT entry.
func (c *Cube) abandon(fe model.Frontend, revNATID uint32, slots int, acquired []uint32) {
	for j := range slots {
		_ = c.deleteSlot(fe, j)
	}
	c.releaseAll(acquired)
	_ = c.deleteID(datapath.MapRevNAT, revNATID)
}

// Delete removes fe: master entry first, so packets stop matching at once.
func (c *Cube) Delete(fe model.Frontend) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := serviceKey(fe, 0)
	f := c.frontends[key]
	if f == nil {
		return nil
	}
	if err := c.deleteService(key); err != nil {
		return err
	}
	for i := range f.slots {
		if err := c.deleteSlot(fe, i); err != nil {
			return err
		}
	}
	if err := c.deleteID(datapath.MapRevNAT, f.revNATID); err != nil {
		return err
	}
	c.deleteAffinityMatch(f.revNATID, f.affinity, f.slots, 0, nil)
	if isMaglev(f.flags) {
		_ = c.deleteMaglevTable(f.revNATID)
	}
	c.keepRanges(f.revNATID, nil)
	c.tellLeft(fe, f.revNATID, f.slots)
	delete(c.frontends, key)
	c.releaseAll(f.slots)
	c.releaseAll(c.draining[f.revNATID])
	delete(c.draining, f.revNATID)
	return nil
}

// nextSlots computes the slot list for the wanted backend ids, moving as few
// slots as possible. It returns the ids that leave the frontend.
func nextSlots(old []uint32, want []uint32) (next, removed []uint32) {
	if len(old) == 0 { // a new frontend: the common case of a full sync
		return slices.Clone(want), nil
	}
	wanted := newSmallSet(want)
	have := newSmallSet(old)
	var added []uint32
	for _, id := range want {
		if !have.has(id) {
			added = append(added, id)
		}
	}
	next = slices.Clone(old)
	for i := 0; i < len(next); {
		if wanted.has(next[i]) {
			i++
			continue
		}
		removed = append(removed, next[i])
		if len(added) > 0 {
			next[i], added = added[0], added[1:]
			i++
			continue
		}
		last := len(next) - 1
		next[i] = next[last]
		next = next[:last]
	}
	return append(next, added...), removed
}

func serviceKey(fe model.Frontend, slot int) datapath.ServiceKey {
	return datapath.ServiceKey{
		Addr:  datapath.AddrFrom(fe.Addr),
		Port:  datapath.Port(fe.Port),
		Proto: uint8(fe.Proto),
		Slot:  uint16(slot),
	}
}

func (c *Cube) writeSlot(fe model.Frontend, i int, id uint32) error {
	return c.writeService(serviceKey(fe, i+1), datapath.ServiceValue{BackendId: id})
}

func (c *Cube) deleteSlot(fe model.Frontend, i int) error {
	return c.deleteService(serviceKey(fe, i+1))
}

func (c *Cube) writeService(k datapath.ServiceKey, v datapath.ServiceValue) error {
	c.ops.Updates++
	if c.pending != nil {
		c.pending.service(k, v)
		return nil
	}
	return datapath.Put(c.maps, datapath.MapServices, k, v)
}

func (c *Cube) writeBackend(id uint32, b datapath.Backend) error {
	c.ops.Updates++
	if c.pending != nil {
		c.pending.backends.add(id, b)
		return nil
	}
	return datapath.Put(c.maps, datapath.MapBackends, id, b)
}

func (c *Cube) writeRevNAT(id uint32, fe datapath.Frontend) error {
	c.ops.Updates++
	if c.pending != nil {
		c.pending.revNAT.add(id, fe)
		return nil
	}
	return datapath.Put(c.maps, datapath.MapRevNAT, id, fe)
}

func (c *Cube) deleteService(k datapath.ServiceKey) error {
	c.ops.Deletes++
	return datapath.Remove(c.maps, datapath.MapServices, k)
}

// deleteID removes an id-keyed entry (lb_backends, lb_revnat).
func (c *Cube) deleteID(m string, id uint32) error {
	c.ops.Deletes++
	return datapath.Remove(c.maps, m, id)
}
