package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source"
)

// LoadBalancer is what the reconciler programs (the lb cube).
type LoadBalancer interface {
	Upsert(fe model.Frontend, backends []model.Backend) error
	Delete(fe model.Frontend) error
	Frontends() []model.Frontend
}

// Observer is told about every Service sync (metrics); optional. pending is
// how long the Service waited since the first change that made it dirty
// arrived; took is the sync itself.
type Observer interface {
	ServiceSynced(pending, took time.Duration, err error)
}

// allSynced is queued once the source has delivered its initial state: when
// the worker reaches it, every Service delivered before it has been applied.
var allSynced = model.ServiceID{Namespace: "\x00initial-sync"}

// Reconciler implements source.Handler. Changes mark their Service in a
// rate-limited workqueue (deduplicated: a Service changed ten times before
// the worker gets to it is synced once); the worker syncs one Service at a
// time, and a Service whose sync fails is retried with exponential backoff
// without holding up the others.
type Reconciler struct {
	lb       LoadBalancer
	observer Observer
	queue    workqueue.TypedRateLimitingInterface[model.ServiceID]

	mu         sync.Mutex // guards the cluster view, written by the source
	services   map[model.ServiceID]*corev1.Service
	slices     map[model.ServiceID]map[string]*discoveryv1.EndpointSlice
	sliceOwner map[types.NamespacedName]model.ServiceID
	failures   map[model.ServiceID]error
	dirtySince map[model.ServiceID]time.Time
	node       *corev1.Node

	applied map[model.ServiceID]model.Frontends // only touched by the worker
	synced  chan struct{}                       // closed after the first full sync
	// sourceDone is closed when the source has delivered its initial state.
	// No Service is applied before: a Service listed before its
	// EndpointSlices would be programmed without backends for a moment,
	// rejecting new connections and moving established ones.
	sourceDone chan struct{}
	// The initial sync, measured: when the first change arrived, and the
	// time spent applying Services until the first full sync was done.
	firstEvent  time.Time
	initialSync InitialSync
}

var _ source.Handler = (*Reconciler)(nil)

// New returns a reconciler programming lb; observer may be nil.
func New(lb LoadBalancer, observer Observer) *Reconciler {
	return &Reconciler{
		lb:       lb,
		observer: observer,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[model.ServiceID](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[model.ServiceID]{Name: "services"}),
		services:   map[model.ServiceID]*corev1.Service{},
		slices:     map[model.ServiceID]map[string]*discoveryv1.EndpointSlice{},
		sliceOwner: map[types.NamespacedName]model.ServiceID{},
		failures:   map[model.ServiceID]error{},
		dirtySince: map[model.ServiceID]time.Time{},
		applied:    map[model.ServiceID]model.Frontends{},
		synced:     make(chan struct{}),
		sourceDone: make(chan struct{}),
	}
}

// OnService records a Service change.
func (r *Reconciler) OnService(key types.NamespacedName, svc *corev1.Service) {
	id := model.ServiceID{Namespace: key.Namespace, Name: key.Name}
	r.mu.Lock()
	if svc == nil {
		delete(r.services, id)
	} else {
		r.services[id] = svc
	}
	r.markDirty(id)
	r.mu.Unlock()
	r.queue.Add(id)
}

// markDirty remembers when a Service first became dirty; r.mu is held.
func (r *Reconciler) markDirty(id model.ServiceID) {
	if _, ok := r.dirtySince[id]; !ok {
		r.dirtySince[id] = time.Now()
	}
	if r.firstEvent.IsZero() {
		r.firstEvent = time.Now()
	}
}

// OnEndpointSlice records an EndpointSlice change and queues its Service
// (and the Service it belonged to before, if its label changed).
func (r *Reconciler) OnEndpointSlice(key types.NamespacedName, slice *discoveryv1.EndpointSlice) {
	var dirty []model.ServiceID
	r.mu.Lock()
	if prev, ok := r.sliceOwner[key]; ok {
		delete(r.slices[prev], key.Name)
		if len(r.slices[prev]) == 0 {
			delete(r.slices, prev)
		}
		delete(r.sliceOwner, key)
		dirty = append(dirty, prev)
		r.markDirty(prev)
	}
	if slice != nil {
		if id, ok := k8s.ServiceOf(slice); ok {
			if r.slices[id] == nil {
				r.slices[id] = map[string]*discoveryv1.EndpointSlice{}
			}
			r.slices[id][key.Name] = slice
			r.sliceOwner[key] = id
			dirty = append(dirty, id)
			r.markDirty(id)
		}
	}
	r.mu.Unlock()
	for _, id := range dirty {
		r.queue.Add(id)
	}
}

// OnNode records this node's Node object. Nothing is programmed from it yet:
// its addresses are what NodePort Services will listen on.
func (r *Reconciler) OnNode(name string, node *corev1.Node) {
	r.mu.Lock()
	r.node = node
	r.mu.Unlock()
	if node != nil {
		slog.Info("node", "name", name, "addresses", node.Status.Addresses)
	}
}

// OnSynced marks the end of the source's initial state.
func (r *Reconciler) OnSynced() {
	r.queue.Add(allSynced)
	close(r.sourceDone)
}

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

// Run works the queue, once the source's initial state is complete, until
// ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	go func() { <-ctx.Done(); r.queue.ShutDown() }()
	select {
	case <-r.sourceDone:
	case <-ctx.Done():
		return
	}
	for r.processNext() {
	}
}

// Sync works the queue until it is empty (for tests and benchmarks, which
// drive the reconciler without Run). Items waiting for a retry are not
// waited for.
func (r *Reconciler) Sync() error {
	select {
	case <-r.sourceDone:
	default:
		return nil // nothing is applied before the initial state is complete
	}
	var first error
	for r.queue.Len() > 0 {
		id, _ := r.queue.Get()
		if err := r.handle(id); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (r *Reconciler) processNext() bool {
	id, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	if err := r.handle(id); err != nil {
		slog.Error("service not applied, retrying", "service", id, "in", r.queue.NumRequeues(id), "err", err)
	}
	return true
}

// handle syncs one queue item; Done/Forget/AddRateLimited as in
// sample-controller.
func (r *Reconciler) handle(id model.ServiceID) error {
	defer r.queue.Done(id)
	if id == allSynced {
		r.finishInitialSync()
		r.queue.Forget(id)
		return nil
	}
	r.mu.Lock()
	since, ok := r.dirtySince[id]
	delete(r.dirtySince, id) // a change arriving from here on is a new one
	r.mu.Unlock()
	start := time.Now()
	err := r.syncService(id)
	if !r.isSynced() {
		r.mu.Lock()
		r.initialSync.Apply += time.Since(start)
		r.mu.Unlock()
	}
	if r.observer != nil && ok {
		r.observer.ServiceSynced(start.Sub(since), time.Since(start), err)
	}
	r.mu.Lock()
	if err != nil {
		r.failures[id] = err
		r.markDirty(id)
	} else {
		delete(r.failures, id)
	}
	r.mu.Unlock()
	if err != nil {
		r.queue.AddRateLimited(id)
		return err
	}
	r.queue.Forget(id)
	return nil
}

// finishInitialSync runs when everything the source delivered at start has
// been through the queue: only now can frontends that no Service wants (left
// in the pinned maps by an earlier agent) be told from ones not yet seen.
func (r *Reconciler) finishInitialSync() {
	if r.isSynced() {
		return
	}
	start := time.Now()
	defer func() {
		r.mu.Lock()
		r.initialSync.Apply += time.Since(start)
		r.mu.Unlock()
	}()
	if err := r.removeStale(); err != nil {
		slog.Error("removing stale frontends", "err", err)
		r.queue.AddRateLimited(allSynced)
		return
	}
	r.mu.Lock()
	if !r.firstEvent.IsZero() {
		r.initialSync.Wall = time.Since(r.firstEvent)
	}
	r.mu.Unlock()
	close(r.synced)
}

// syncService makes one Service's frontends in the datapath match the
// cluster's view of it.
func (r *Reconciler) syncService(id model.ServiceID) error {
	r.mu.Lock()
	wanted := model.Frontends{}
	if svc := r.services[id]; svc != nil {
		wanted = k8s.Frontends(svc, slices.Collect(maps.Values(r.slices[id])))
	}
	r.mu.Unlock()

	have := r.applied[id]
	if have == nil {
		have = model.Frontends{}
	}
	defer func() {
		if len(have) == 0 {
			delete(r.applied, id)
		} else {
			r.applied[id] = have
		}
	}()
	for fe := range have {
		if _, ok := wanted[fe]; !ok {
			if err := r.lb.Delete(fe); err != nil {
				return fmt.Errorf("service %s: %w", id, err)
			}
			delete(have, fe)
		}
	}
	for fe, bs := range wanted {
		if cur, ok := have[fe]; ok && sameBackends(cur, bs) {
			continue
		}
		if err := r.lb.Upsert(fe, bs); err != nil {
			return fmt.Errorf("service %s: %w", id, err)
		}
		have[fe] = bs
	}
	return nil
}

func (r *Reconciler) removeStale() error {
	wanted := map[model.Frontend]bool{}
	for _, fes := range r.applied {
		for fe := range fes {
			wanted[fe] = true
		}
	}
	for _, fe := range r.lb.Frontends() {
		if !wanted[fe] {
			if err := r.lb.Delete(fe); err != nil {
				return err
			}
		}
	}
	return nil
}

// Failures returns the Services that could not be applied, with why.
func (r *Reconciler) Failures() map[model.ServiceID]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.failures)
}

// Pending is the number of Services waiting to be synced.
func (r *Reconciler) Pending() int { return r.queue.Len() }

func sameBackends(a, b []model.Backend) bool {
	if len(a) != len(b) {
		return false
	}
	set := make(map[model.Backend]bool, len(a))
	for _, x := range a {
		set[x] = true
	}
	for _, x := range b {
		if !set[x] {
			return false
		}
	}
	return true
}
