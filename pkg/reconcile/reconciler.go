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

// retryAfter is how long a Service whose update failed waits to be retried.
const retryAfter = time.Second

// Reconciler implements source.Handler.
type Reconciler struct {
	lb LoadBalancer

	mu         sync.Mutex
	services   map[model.ServiceID]*corev1.Service
	slices     map[model.ServiceID]map[string]*discoveryv1.EndpointSlice
	sliceOwner map[types.NamespacedName]model.ServiceID
	dirty      map[model.ServiceID]bool
	sourceDone bool // the source delivered its initial state

	applied  map[model.ServiceID]model.Frontends // only touched by Sync
	synced   chan struct{}                       // closed after the first full sync
	kick     chan struct{}
	failures map[model.ServiceID]error
}

var _ source.Handler = (*Reconciler)(nil)

// New returns a reconciler programming lb.
func New(lb LoadBalancer) *Reconciler {
	return &Reconciler{
		lb:         lb,
		services:   map[model.ServiceID]*corev1.Service{},
		slices:     map[model.ServiceID]map[string]*discoveryv1.EndpointSlice{},
		sliceOwner: map[types.NamespacedName]model.ServiceID{},
		dirty:      map[model.ServiceID]bool{},
		applied:    map[model.ServiceID]model.Frontends{},
		synced:     make(chan struct{}),
		kick:       make(chan struct{}, 1),
		failures:   map[model.ServiceID]error{},
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
	r.dirty[id] = true
	r.mu.Unlock()
	r.wake()
}

// OnEndpointSlice records an EndpointSlice change and marks its Service (and
// the Service it belonged to before, if the label moved) dirty.
func (r *Reconciler) OnEndpointSlice(key types.NamespacedName, slice *discoveryv1.EndpointSlice) {
	r.mu.Lock()
	if prev, ok := r.sliceOwner[key]; ok {
		delete(r.slices[prev], key.Name)
		if len(r.slices[prev]) == 0 {
			delete(r.slices, prev)
		}
		delete(r.sliceOwner, key)
		r.dirty[prev] = true
	}
	if slice != nil {
		if id, ok := k8s.ServiceOf(slice); ok {
			if r.slices[id] == nil {
				r.slices[id] = map[string]*discoveryv1.EndpointSlice{}
			}
			r.slices[id][key.Name] = slice
			r.sliceOwner[key] = id
			r.dirty[id] = true
		}
	}
	r.mu.Unlock()
	r.wake()
}

// OnSynced allows the first full sync.
func (r *Reconciler) OnSynced() {
	r.mu.Lock()
	r.sourceDone = true
	r.mu.Unlock()
	r.wake()
}

func (r *Reconciler) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Synced is closed once the first full sync has been applied.
func (r *Reconciler) Synced() <-chan struct{} { return r.synced }

// Run syncs whenever something changed, until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-retry.C:
		}
		if err := r.Sync(); err != nil {
			slog.Error("sync incomplete, retrying", "in", retryAfter, "err", err)
			retry.Reset(retryAfter)
		}
	}
}

// Sync applies every dirty Service. The first call after the source's
// initial state also removes frontends that no Service wants any more
// (left in the pinned maps by an earlier agent).
func (r *Reconciler) Sync() error {
	r.mu.Lock()
	if !r.sourceDone {
		r.mu.Unlock()
		return nil
	}
	type work struct {
		id     model.ServiceID
		wanted model.Frontends
	}
	var todo []work
	for id := range r.dirty {
		wanted := model.Frontends{}
		if svc := r.services[id]; svc != nil {
			wanted = k8s.Frontends(svc, slices.Collect(maps.Values(r.slices[id])))
		}
		todo = append(todo, work{id, wanted})
	}
	clear(r.dirty)
	first := !r.isSynced()
	r.mu.Unlock()

	var failed []error
	for _, w := range todo {
		if err := r.apply(w.id, w.wanted); err != nil {
			failed = append(failed, err)
			r.mu.Lock()
			r.dirty[w.id] = true
			r.failures[w.id] = err
			r.mu.Unlock()
		} else {
			r.mu.Lock()
			delete(r.failures, w.id)
			r.mu.Unlock()
		}
	}
	if first {
		if err := r.removeStale(); err != nil {
			failed = append(failed, err)
		}
		if len(failed) == 0 {
			close(r.synced)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d services not applied, first: %w", len(failed), failed[0])
	}
	return nil
}

func (r *Reconciler) isSynced() bool {
	select {
	case <-r.synced:
		return true
	default:
		return false
	}
}

// apply makes one Service's frontends match wanted.
func (r *Reconciler) apply(id model.ServiceID, wanted model.Frontends) error {
	have := r.applied[id]
	for fe := range have {
		if _, ok := wanted[fe]; !ok {
			if err := r.lb.Delete(fe); err != nil {
				return fmt.Errorf("service %s: %w", id, err)
			}
			delete(have, fe)
		}
	}
	if have == nil {
		have = model.Frontends{}
	}
	for fe, bs := range wanted {
		if cur, ok := have[fe]; ok && sameBackends(cur, bs) {
			continue
		}
		if err := r.lb.Upsert(fe, bs); err != nil {
			r.applied[id] = have
			return fmt.Errorf("service %s: %w", id, err)
		}
		have[fe] = bs
	}
	if len(have) == 0 {
		delete(r.applied, id)
	} else {
		r.applied[id] = have
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
