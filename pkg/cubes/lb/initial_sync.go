package lb

// The initial sync: everything the source delivered before its initial
// state was complete is applied in one pass, in batches through the lb
// cube's batched map writes; only then are frontends no Service wants
// (left in the pinned maps by an earlier agent) removed.

import (
	"log/slog"
	"slices"
	"time"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// InitialSync describes the first full sync.
type InitialSync struct {
	// Apply is the time spent computing and writing every Service, once
	// the source's initial state was complete.
	Apply time.Duration
	// Wall is from the first change's arrival to every Service applied.
	Wall time.Duration
}

// InitialSync is valid once Synced is closed.
func (r *Reconciler) InitialSync() InitialSync {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.initialSync
}

// Synced is closed once the first full sync has been applied.
func (r *Reconciler) Synced() <-chan struct{} { return r.synced }

func (r *Reconciler) isSynced() bool {
	select {
	case <-r.synced:
		return true
	default:
		return false
	}
}

// initialSyncOnce applies, in one pass, everything the source delivered
// before it declared its initial state complete; only then can frontends
// that no Service wants (left in the pinned maps by an earlier agent) be told
// from ones not yet seen, and removed.
func (r *Reconciler) initialSyncOnce() {
	if r.isSynced() {
		return
	}
	start := time.Now()
	unapplied := r.applyAll()
	if err := r.removeStale(unapplied); err != nil {
		slog.Error("removing stale frontends", "err", err)
		r.mu.Lock()
		r.initialSync.Apply += time.Since(start)
		r.mu.Unlock()
		r.queue.AddRateLimited(allSynced)
		return
	}
	// Backends a restore kept for draining flows, and nobody claimed.
	if u, ok := r.lb.(interface{ ReleaseUnclaimed() error }); ok {
		if err := u.ReleaseUnclaimed(); err != nil {
			slog.Error("removing unused backends", "err", err)
		}
	}
	// Counted before Synced is closed: whoever waits on it reads this (it
	// was added after, in a deferred call, and the sync benchmark once
	// read an apply time of 0).
	r.mu.Lock()
	r.initialSync.Apply += time.Since(start)
	if !r.firstEvent.IsZero() {
		r.initialSync.Wall = time.Since(r.firstEvent)
	}
	r.mu.Unlock()
	r.programmedInitially()
	close(r.synced)
}

// reserve sizes the owners' index and the LB's for the Services ids are
// about to add (their ClusterIP frontends, and an endpoint per slice port:
// a bound, and the usual count), rather than letting them grow step by
// step, which left each step's old tables as garbage while the heap was at
// its largest. r.mu is held.
func (r *Reconciler) reserve(ids []model.ServiceID) {
	frontends, backends := 0, 0
	for _, id := range ids {
		st := r.existing(id)
		if st.svc == nil {
			continue
		}
		frontends += len(st.svc.ClusterIPs()) * len(st.svc.Ports())
		for _, s := range st.slices {
			backends += len(s.Endpoints) * max(1, len(s.Ports()))
		}
	}
	if len(r.owners.of) == 0 {
		r.owners.of = make(map[datapath.ServiceKey]*model.ServiceID, frontends)
	}
	if lb, ok := r.lb.(interface{ Reserve(frontends, backends int) }); ok {
		lb.Reserve(frontends, backends)
	}
}

// initialBatch is how many Services the initial sync applies at a time:
// enough for large map-update batches, few enough that the batch's
// temporary state (wanted frontends, pending map writes) stays small
// whatever the size of the cluster.
const initialBatch = 4096

// applyAll applies every dirty Service (the initial sync), initialBatch at a
// time, through the LB's batched path. If a batch fails, each of its
// Services is queued to be synced on its own, which retries and reports
// Service by Service; their wanted frontends are returned, not to be taken
// for stale meanwhile.
func (r *Reconciler) applyAll() (unapplied []model.Frontend) {
	r.mu.Lock()
	ids := make([]model.ServiceID, 0, r.states.len())
	for k, st := range r.states.all() {
		id := model.ServiceID(k)
		if !st.dirtySince.IsZero() {
			ids = append(ids, id)
		}
	}
	r.reserve(ids)
	// Ownership first, from every Service's frontends (without backends:
	// cheap), so that each batch programs only what its Services own.
	// The frontends are computed into buffers reused from one Service to
	// the next (claim keeps none of them).
	var changed []model.ServiceID
	var fbs model.Frontends
	var fes []model.Frontend
	var won frontendSet
	for _, id := range ids {
		st := r.existing(id)
		fbs = appendFrontends(nil, fbs[:0], st.svc, nil, r.thisNode)
		fes = appendFrontendsOf(fes[:0], fbs)
		ch := r.claimInto(&won, id, fes, st.applied)
		changed = append(changed, ch...)
	}
	r.mu.Unlock()
	r.resync(changed)
	var b syncBatch
	for chunk := range slices.Chunk(ids, initialBatch) {
		unapplied = append(unapplied, r.applyBatch(&b, chunk)...)
	}
	for _, id := range b.healthChecked {
		if err := r.syncHealthCheck(id); err != nil {
			slog.Error("health check", "service", id, "err", err)
		}
	}
	if r.adv != nil {
		for _, id := range ids {
			r.syncAdvertised(id)
		}
	}
	return unapplied
}

// syncBatch is applyBatch's scratch space, reused from one batch to the next.
type syncBatch struct {
	states []*serviceState
	count  []int // frontends of states[i] in items
	items  []model.FrontendBackends
	// backends: the items' backend lists.
	backends backendArena
	// fes and won: one Service's frontends, and those it owns.
	fes []model.Frontend
	won frontendSet
	// healthChecked: applied Services with a health-check port, opened
	// once the whole initial sync is done.
	healthChecked []model.ServiceID
}

func (r *Reconciler) applyBatch(b *syncBatch, ids []model.ServiceID) (unapplied []model.Frontend) {
	b.states, b.count, b.items = b.states[:0], b.count[:0], b.items[:0]
	b.backends.reset() // the last batch's items are done with
	r.mu.Lock()
	for _, id := range ids {
		// Only the worker (this goroutine) cleans or forgets states, so
		// every listed Service is still here, and still dirty.
		st := r.existing(id)
		st.dirtySince = 0
		// Computed straight into the batch, the frontends another Service
		// owns then dropped; fes and won are scratch.
		start := len(b.items)
		b.items = appendElectedFrontends(&b.backends, b.items, st.svc, st.slices, r.thisNode, r.elector)
		w := b.items[start:]
		b.fes = appendFrontendsOf(b.fes[:0], w)
		b.won = frontendSet{list: b.won.list[:0]}
		w = slices.DeleteFunc(w, func(f model.FrontendBackends) bool {
			if owner, ok := r.owners.owner(f.Frontend); ok && owner == id {
				b.won.add(f.Frontend)
				return false
			}
			return true
		})
		r.reportConflicts(id, b.fes, &b.won)
		b.items = b.items[:start+len(w)]
		b.states, b.count = append(b.states, st), append(b.count, len(w))
	}
	r.mu.Unlock()
	err := r.lb.UpsertAll(b.items)
	if err != nil {
		slog.Error("batched initial sync failed; syncing Service by Service", "services", len(ids), "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	items := b.items
	for i, id := range ids {
		mine := items[:b.count[i]]
		items = items[b.count[i]:]
		if err != nil {
			r.markDirty(id)
			r.queue.Add(id)
			for _, f := range mine {
				unapplied = append(unapplied, f.Frontend)
			}
			continue
		}
		keys := make(frontendKeys, len(mine))
		for j, f := range mine {
			keys[j] = ownerKey(f.Frontend)
		}
		b.states[i].applied = keys
		if svc := b.states[i].svc; svc != nil && svc.External != nil && svc.External.HealthCheckNodePort != 0 {
			b.healthChecked = append(b.healthChecked, id)
		}
		r.forgetIfEmpty(id, b.states[i])
	}
	return unapplied
}

// removeStale deletes the frontends in the datapath that no Service has
// applied (left by an earlier agent) and the batch did not leave for a
// retry (unapplied). Most frontends are found through their owner's
// applied list; only if one is not is the full set of applied frontends
// built (on a first start it never is: it took ~6 MB at 100,000 Services,
// at the moment the agent's heap is largest).
func (r *Reconciler) removeStale(unapplied []model.Frontend) error {
	// wanted: every applied frontend and the unapplied ones; built at
	// once if there are unapplied ones, else on the first miss. Only the
	// worker (this goroutine) changes what is applied.
	var wanted map[model.Frontend]bool
	want := func() {
		wanted = r.appliedFrontends()
		for _, fe := range unapplied {
			wanted[fe] = true
		}
	}
	if len(unapplied) > 0 {
		want()
	} else if r.nothingStale() {
		return nil
	}
	for _, fe := range r.lb.Frontends() {
		if wanted == nil && r.appliedByOwner(fe) {
			continue
		}
		if wanted == nil {
			want()
		}
		if !wanted[fe] {
			if err := r.lb.Delete(fe); err != nil {
				return err
			}
		}
	}
	return nil
}

// nothingStale says whether the LB has no frontend but those the Services
// have applied: it has every one of them (a frontend a Service applied
// stays in the maps until that Service deletes it), no two Services list
// the same one (each applies only what it owns), so if it has as many as
// they list, it has no other. Then no list of every frontend is made (3
// MB at 100,000 Services, at the moment the agent's heap is largest).
func (r *Reconciler) nothingStale() bool {
	lb, ok := r.lb.(interface{ FrontendCount() int })
	if !ok {
		return false
	}
	r.mu.Lock()
	applied := 0
	for _, st := range r.states.all() {
		applied += len(st.applied)
	}
	r.mu.Unlock()
	return lb.FrontendCount() == applied
}

// appliedByOwner says whether fe's owner has it applied.
func (r *Reconciler) appliedByOwner(fe model.Frontend) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	owner, ok := r.owners.owner(fe)
	if !ok {
		return false
	}
	st := r.existing(owner)
	return st != nil && slices.Contains(st.applied, ownerKey(fe))
}

// appliedFrontends is every frontend some Service has applied.
func (r *Reconciler) appliedFrontends() map[model.Frontend]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	wanted := make(map[model.Frontend]bool, r.states.len())
	for _, st := range r.states.all() {
		for _, k := range st.applied {
			wanted[frontendOf(k)] = true
		}
	}
	return wanted
}
