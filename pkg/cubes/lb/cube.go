package lb

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Cube holds what has been written to the LB maps. Its methods are safe for
// concurrent use (the reconciler writes, metrics read).
type Tables struct {
	mu   sync.Mutex
	maps *cube.Maps
	// Keys are the maps' own layouts (datapath.ServiceKey with slot 0,
	// datapath.Backend): 20-24 bytes without pointers, where model types
	// take 32-40 with one. At 100,000 Services these indexes are a quarter
	// of the agent's memory, and maps without pointers are not scanned by
	// the garbage collector. backends, one entry per backend, is the
	// largest: a table of its own (backend_table.go).
	frontends map[datapath.ServiceKey]*frontend
	backends  *backendTable
	// IDs only grow: a conntrack entry naming a freed id must never find a
	// different backend or frontend under it.
	nextBackendID, nextRevNATID uint32
	ops                         Ops
	// mapTime is the time spent in the writes and deletes of lb_services,
	// lb_backends and lb_revnat (batched or not): the part of a sync that
	// is system calls, which the sync benchmark reports apart.
	mapTime time.Duration
	// pending, while UpsertAll runs, collects writes instead of making
	// them, to be flushed in batches; buffer is kept for the next call.
	pending, buffer *pendingWrites
	// fresh: UpsertAll's list of the frontends it adds, kept for the next
	// call.
	fresh []model.Frontend
	// onLeft, if set, is told which backends left a frontend (after the
	// maps no longer offer them), with c.mu held: it must not call back.
	onLeft func(fe model.Frontend, revNATID uint32, left []model.Backend)
	// ranges: the loadBalancerSourceRanges of the frontends that have
	// some, by revNAT id.
	ranges map[uint32][]netip.Prefix
	// held: by revNAT id, for the frontends that have some, backends they
	// hold a reference on (one each) but in no slot: terminating
	// endpoints' backends, which established flows keep using, and those
	// an update took before it failed, which the next update or Delete
	// releases. (A side map: most frontends have none, and a field would
	// cost every one.)
	held map[uint32][]uint32
	// unsure: by revNAT id, the frontends whose last update failed part
	// way, and how many slots the maps may hold for them. Their next
	// update writes every entry again, so a retry converges whatever the
	// failed one left; Delete removes every slot that may exist.
	unsure map[uint32]int
	// leftovers are deletes that failed; each Apply and Delete tries
	// them again first, and reports them until they succeed, so that its
	// caller retries.
	leftovers []func() error
	// unclaimed: backends a restore found in no slot, kept for the first
	// sync to claim as draining (ReleaseUnclaimed releases the rest).
	unclaimed []uint32
	// retired: backends no frontend holds, kept while conntrack may have
	// flows on them (retired.go); nil: such a backend is deleted at once.
	retired map[uint32]struct{}
	// vips: the ClusterIP addresses in lb_vips, and how many frontends
	// hold each (vips.go).
	vips map[datapath.Addr]uint32
	// announced: the LoadBalancer IPs in lb_announce, and how many
	// frontends hold each; uplinks: where they are answered
	// (announce.go).
	announced map[datapath.Addr]uint32
	uplinks   []Uplink
}

// ReleaseUnclaimed retires (retired.go) or deletes the backends that a
// restore kept and the first sync did not claim (no frontend holds them);
// call it once, after that sync.
func (c *Tables) ReleaseUnclaimed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.unclaimed {
		b := c.backends.getID(id)
		if b == nil || b.refs > 0 || c.retire(b) {
			continue
		}
		if err := c.deleteID(MapBackends, id); err != nil {
			return err
		}
		c.backends.remove(id)
	}
	c.unclaimed = nil
	return nil
}

// OnBackendsLeft sets f to be told, from now on, which backends leave a
// frontend (removed from it, or the frontend deleted). f is called with
// the cube locked and must return quickly.
func (c *Tables) OnBackendsLeft(f func(fe model.Frontend, revNATID uint32, left []model.Backend)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onLeft = f
}

// tellLeft reports ids leaving fe to onLeft; c.mu is held.
func (c *Tables) tellLeft(fe model.Frontend, revNATID uint32, ids []uint32) {
	if c.onLeft == nil || len(ids) == 0 {
		return
	}
	left := make([]model.Backend, 0, len(ids))
	for _, id := range ids {
		if b := c.backends.getID(id); b != nil {
			left = append(left, backendOf(c.backends.keyOf(b)))
		}
	}
	c.onLeft(fe, revNATID, left)
}

type frontend struct {
	revNATID uint32
	flags    model.FrontendFlags
	affinity uint32   // seconds; 0: none
	vip      bool     // a ClusterIP: holds its address in lb_vips
	announce bool     // an announced LoadBalancer IP: holds it in lb_announce
	slots    []uint32 // backend id of slot i+1
}

// Ops counts map writes and deletes, for tests, benchmarks and metrics.
type Ops struct{ Updates, Deletes int }

// New returns a cube writing to maps, assumed empty; call Restore instead
// when the maps may hold an earlier agent's state.
func New(maps *cube.Maps) *Tables {
	return &Tables{
		maps:          maps,
		frontends:     map[datapath.ServiceKey]*frontend{},
		backends:      newBackendTable(),
		nextBackendID: 1,
		nextRevNATID:  1,
		ranges:        map[uint32][]netip.Prefix{},
		held:          map[uint32][]uint32{},
		unsure:        map[uint32]int{},
		vips:          map[datapath.Addr]uint32{},
		announced:     map[datapath.Addr]uint32{},
	}
}

// Reserve makes room in the cube's indexes for about frontends frontends
// (addresses for as many ClusterIPs) and backends backends, before a full
// sync adds them: growing them step by step left each step's old tables
// as garbage, at the moment the agent's heap is largest. It only grows.
func (c *Tables) Reserve(frontends, backends int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.frontends) == 0 && frontends > 0 {
		c.frontends = make(map[datapath.ServiceKey]*frontend, frontends)
	}
	if len(c.vips) == 0 && frontends > 0 {
		c.vips = make(map[datapath.Addr]uint32, frontends)
	}
	c.backends.reserve(backends)
}

// timeMaps adds the time since start to mapTime; c.mu is held.
func (c *Tables) timeMaps(start time.Time) { c.mapTime += time.Since(start) }

// MapTime is the time spent writing and deleting map entries so far.
func (c *Tables) MapTime() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mapTime
}

// Ops returns the map operations done so far.
func (c *Tables) Ops() Ops {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// Entries returns how many entries the cube keeps in each of its maps.
func (c *Tables) Entries() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	services := 0
	for _, f := range c.frontends {
		services += 1 + len(f.slots)
	}
	return map[string]int{
		MapServices: services,
		MapBackends: c.backends.len(),
		MapRevNAT:   len(c.frontends),
		MapVIPs:     len(c.vips),
		MapAnnounce: len(c.announced) * len(c.uplinks),
		MapUplinks:  len(c.uplinks),
	}
}

// FrontendCount is the number of frontends present in the maps.
func (c *Tables) FrontendCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.frontends)
}

// Frontends lists the frontends present in the maps.
func (c *Tables) Frontends() []model.Frontend {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]model.Frontend, 0, len(c.frontends))
	for k := range c.frontends {
		out = append(out, frontendOf(k))
	}
	return out
}

// Backends returns the backends of an applied frontend, in slot order.
func (c *Tables) Backends(fe model.Frontend) []model.Backend {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.frontends[serviceKey(fe, 0)]
	if f == nil {
		return nil
	}
	out := make([]model.Backend, len(f.slots))
	for i, id := range f.slots {
		out[i] = c.backendByID(id)
	}
	return out
}

// Upsert makes fe load-balance over backends (none: fe rejects). Only the
// slots that change are written: adding or removing one backend costs O(1)
// map operations whatever the size of the Service or of the cluster.
func (c *Tables) Upsert(fe model.Frontend, backends []model.Backend) error {
	return c.Apply(model.FrontendBackends{Frontend: fe, Backends: backends})
}

// Apply is Upsert with the frontend's options (flags).
func (c *Tables) Apply(fb model.FrontendBackends) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retryLeftovers()
	if err := c.upsert(fb); err != nil {
		return err
	}
	return c.leftoverError()
}

// upsert is Apply with c.mu held. Its writes are ordered so that a packet
// never meets a half-written frontend: backends, then the revNAT entry,
// then slots beyond the old count, slots changed in place, the Maglev
// table and source ranges, and the master entry last; then what is no
// longer needed goes. Every write creates or replaces, so an update that
// fails part way is completed by the next one (the frontend is marked
// unsure, and its next update writes everything again); a new frontend
// that fails is deleted, so it takes no room from others.
func (c *Tables) upsert(fb model.FrontendBackends) (err error) {
	fe, backends := fb.Frontend, fb.Backends
	if !fe.Addr.IsValid() || fe.Port == 0 {
		return fmt.Errorf("invalid frontend %s", fe)
	}
	key := serviceKey(fe, 0)
	f, exists := c.frontends[key]
	if !exists {
		f = &frontend{revNATID: c.nextRevNATID}
		c.nextRevNATID++
		c.frontends[key] = f
	}
	old := f.slots
	_, rewrite := c.unsure[f.revNATID]
	prevHeld := c.held[f.revNATID]
	var next, removed, acquired []uint32
	defer func() {
		if err == nil {
			return
		}
		// The backends this update took are held until the next update
		// (or Delete) releases them. (Recorded only now: doing it up front
		// cost every update a copy and a map entry.)
		if len(acquired) > 0 {
			c.held[f.revNATID] = append(slices.Clone(prevHeld), acquired...)
		}
		err = fmt.Errorf("frontend %s: %w", fe, err)
		c.unsure[f.revNATID] = max(c.unsure[f.revNATID], len(old), len(next))
		if rs := union(c.ranges[f.revNATID], fb.SourceRanges); len(rs) > 0 {
			c.ranges[f.revNATID] = rs // written, maybe: keepRanges deletes them
		}
		if !exists {
			_ = c.remove(key, f) // give its room back; a retry starts afresh
		}
	}()

	// 1. Backends first: every slot written below must point at one. A
	// backend taken here is held: if the update fails, the next one (or
	// Delete) releases it.
	var want []uint32
	want, acquired, err = c.acquireAll(fe.Proto, backends, f.slots)
	if err != nil {
		return err
	}
	if !exists || rewrite {
		rn := datapath.Frontend{Addr: datapath.AddrFrom(fe.Addr), Port: datapath.Port(fe.Port)}
		if err := c.writeRevNAT(f.revNATID, rn); err != nil {
			return err
		}
	}

	// 2. The new slot list: kept backends stay where they are; a new backend
	// takes the place of a removed one, else goes to the end; a hole left by
	// a removed backend is filled with the last slot.
	next, removed = nextSlots(f.slots, want)

	// Backends joining a Service with affinity may be stuck to from now on.
	prev, prevAffinity := old, f.affinity
	if rewrite {
		prev, prevAffinity = nil, 0
	}
	if err := c.writeAffinityMatch(f.revNATID, fb.Affinity, next, prevAffinity, prev); err != nil {
		return err
	}

	// 3. Slots beyond the old count first (the only writes that can hit a
	// full map), then in-place changes, then the master entry, then the
	// slots no longer counted. Readers holding the old count see valid
	// backends throughout: removed backends are released only at the end.
	for i := len(old); i < len(next); i++ {
		if err := c.writeSlot(fe, i, next[i]); err != nil {
			return err
		}
	}
	for i := 0; i < min(len(old), len(next)); i++ {
		if rewrite || old[i] != next[i] {
			if err := c.writeSlot(fe, i, next[i]); err != nil {
				return err
			}
		}
	}
	// The Maglev table, rebuilt when the backends change, is in place
	// before the master entry can send packets to it.
	switch {
	case isMaglev(fb.Flags) && (rewrite || !isMaglev(f.flags) || !sameIDs(old, next)):
		if err := c.writeMaglevTable(f.revNATID, next); err != nil {
			return err
		}
	case !isMaglev(fb.Flags) && (rewrite || isMaglev(f.flags)):
		defer removeOrRetry(c, MapMaglev, f.revNATID) // once the master no longer uses it
	}
	// Source ranges are allowed before the master may check them.
	var ranges []netip.Prefix
	if fb.Flags&model.SourceRanges != 0 {
		ranges = fb.SourceRanges
		if err := c.writeRanges(f.revNATID, ranges, rewrite); err != nil {
			return err
		}
	}
	// A ClusterIP's address is listed before its master entry exists (and
	// a frontend no longer one leaves the list only after, below).
	if isVIP(fb.Flags) {
		if err := c.holdVIP(key.Addr, f, true); err != nil {
			return err
		}
	}
	if err := c.holdAnnounce(key.Addr, f, wantsAnnounce(fb.Flags)); err != nil {
		return err
	}
	if !exists || rewrite || len(old) != len(next) || f.flags != fb.Flags || f.affinity != fb.Affinity {
		master := datapath.ServiceValue{Count: uint16(len(next)), RevNatId: f.revNATID, Flags: bpfFlags(fb.Flags) | scopeFlag(fe), BackendId: fb.Affinity}
		if err := c.writeService(serviceKey(fe, 0), master); err != nil {
			return err
		}
	}

	// 4. The frontend is whole: what it no longer uses goes.
	written := max(len(old), c.unsure[f.revNATID])
	delete(c.unsure, f.revNATID)
	f.slots, f.flags, f.affinity = next, fb.Flags, fb.Affinity
	c.keepRanges(f.revNATID, ranges)            // the master no longer needs the others
	_ = c.holdVIP(key.Addr, f, isVIP(fb.Flags)) // releasing cannot fail
	// Backends that left are no longer stuck to (after a failed update,
	// any it may have written for).
	if rewrite {
		c.deleteAffinityMatch(f.revNATID, 1, append(slices.Clone(old), prevHeld...), fb.Affinity, next)
	} else {
		c.deleteAffinityMatch(f.revNATID, prevAffinity, old, fb.Affinity, next)
	}
	c.tellLeft(fe, f.revNATID, removed)
	// Hold the draining backends before releasing anything, so one moving
	// from a slot to draining never leaves the map.
	draining := c.holdDraining(fe.Proto, fb.Draining, next)
	c.releaseAll(removed)
	c.releaseAll(prevHeld) // this update's own references are now its slots
	acquired = nil
	if len(draining) > 0 {
		c.held[f.revNATID] = draining
	} else {
		delete(c.held, f.revNATID)
	}
	// Slots beyond the count: no packet reads them. One that cannot be
	// deleted now is deleted by the next update (the error has the caller
	// retry) or by Delete.
	for i := len(next); i < written; i++ {
		if err := c.deleteSlot(fe, i); err != nil {
			c.unsure[f.revNATID] = written
			return err
		}
	}
	return nil
}

// union is a with the prefixes of b it lacks.
func union(a, b []netip.Prefix) []netip.Prefix {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// holdDraining takes a reference on each draining backend not in a slot
// (writing it if the map does not have it) and returns their ids. Keeping
// established flows is best effort: a backend that does not fit is left
// out, and its flows are balanced again.
func (c *Tables) holdDraining(proto model.Proto, bs []model.Backend, slots []uint32) []uint32 {
	var ids []uint32
	inSlots := newSmallSet(slots)
	for _, b := range bs {
		k := backendKey(b, proto)
		if have := c.backends.get(k); have != nil && (inSlots.has(have.id) || slices.Contains(ids, have.id)) {
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

// Delete removes fe: master entry first, so packets stop matching at once.
func (c *Tables) Delete(fe model.Frontend) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retryLeftovers()
	key := serviceKey(fe, 0)
	if f := c.frontends[key]; f != nil {
		if err := c.remove(key, f); err != nil {
			return err
		}
	}
	return c.leftoverError()
}

// remove deletes every entry f may have in the maps (a missing one is
// fine) and releases its backends; c.mu is held. If a delete fails, f
// stays known, and Delete tries again.
func (c *Tables) remove(key datapath.ServiceKey, f *frontend) error {
	fe := frontendOf(key)
	if err := c.deleteService(key); err != nil {
		return err
	}
	for i := range max(len(f.slots), c.unsure[f.revNATID]) {
		if err := c.deleteSlot(fe, i); err != nil {
			return err
		}
	}
	if err := c.deleteID(MapRevNAT, f.revNATID); err != nil {
		return err
	}
	held := c.held[f.revNATID]
	_, unsure := c.unsure[f.revNATID]
	if f.affinity != 0 || unsure {
		c.deleteAffinityMatch(f.revNATID, 1, append(slices.Clone(f.slots), held...), 0, nil)
	}
	if isMaglev(f.flags) || unsure {
		removeOrRetry(c, MapMaglev, f.revNATID)
	}
	c.keepRanges(f.revNATID, nil)
	_ = c.holdVIP(key.Addr, f, false)      // releasing cannot fail
	_ = c.holdAnnounce(key.Addr, f, false) // nor here
	c.tellLeft(fe, f.revNATID, f.slots)
	delete(c.frontends, key)
	delete(c.unsure, f.revNATID)
	c.releaseAll(f.slots)
	c.releaseAll(held)
	delete(c.held, f.revNATID)
	return nil
}

// nextSlots computes the slot list for the wanted backend ids, moving as few
// slots as possible (for a new frontend, want itself). It returns the ids
// that leave the frontend.
func nextSlots(old []uint32, want []uint32) (next, removed []uint32) {
	if len(old) == 0 { // a new frontend: the common case of a full sync
		return want, nil // the caller's own (acquireAll's)
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
		Scope: scopeOf(fe),
		Slot:  uint16(slot),
	}
}

func (c *Tables) writeSlot(fe model.Frontend, i int, id uint32) error {
	return c.writeService(serviceKey(fe, i+1), datapath.ServiceValue{BackendId: id})
}

func (c *Tables) deleteSlot(fe model.Frontend, i int) error {
	return c.deleteService(serviceKey(fe, i+1))
}

func (c *Tables) writeService(k datapath.ServiceKey, v datapath.ServiceValue) error {
	c.ops.Updates++
	if c.pending != nil {
		c.pending.service(k, v)
		return nil
	}
	defer c.timeMaps(time.Now())
	return cube.Put(c.maps, MapServices, k, v)
}

func (c *Tables) writeBackend(id uint32, b datapath.Backend) error {
	c.ops.Updates++
	if c.pending != nil {
		c.pending.backends.add(id, b)
		return nil
	}
	defer c.timeMaps(time.Now())
	return cube.Put(c.maps, MapBackends, id, b)
}

func (c *Tables) writeRevNAT(id uint32, fe datapath.Frontend) error {
	c.ops.Updates++
	if c.pending != nil {
		c.pending.revNAT.add(id, fe)
		return nil
	}
	defer c.timeMaps(time.Now())
	return cube.Put(c.maps, MapRevNAT, id, fe)
}

func (c *Tables) deleteService(k datapath.ServiceKey) error {
	c.ops.Deletes++
	defer c.timeMaps(time.Now())
	return cube.Remove(c.maps, MapServices, k)
}

// deleteID removes an id-keyed entry (lb_backends, lb_revnat).
func (c *Tables) deleteID(m string, id uint32) error {
	c.ops.Deletes++
	defer c.timeMaps(time.Now())
	return cube.Remove(c.maps, m, id)
}

// removeOrRetry deletes key from the named map, or keeps the delete for
// later (leftovers) if it fails: an entry nothing points at any more.
func removeOrRetry[K any](c *Tables, name string, key K) {
	c.ops.Deletes++
	del := func() error {
		defer c.timeMaps(time.Now())
		return cube.Remove(c.maps, name, key)
	}
	if del() != nil {
		c.leftovers = append(c.leftovers, del)
	}
}

// retryLeftovers tries the failed deletes again; c.mu is held.
func (c *Tables) retryLeftovers() {
	var still []func() error
	for _, del := range c.leftovers {
		if del() != nil {
			still = append(still, del)
		}
	}
	c.leftovers = still
}

// leftoverError reports the deletes still to do.
func (c *Tables) leftoverError() error {
	if len(c.leftovers) == 0 {
		return nil
	}
	return fmt.Errorf("%d map entries no longer used could not be deleted yet (retried on the next update)", len(c.leftovers))
}
