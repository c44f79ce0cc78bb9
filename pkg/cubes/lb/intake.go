package lb

// The source's side of the reconciler: each change delivered (a Service,
// an EndpointSlice, this node's Node) is recorded under Reconciler.mu and
// marks its Service dirty; once the initial state is complete, the Service
// is queued for the worker (reconciler.go).

import (
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
)

// OnService records a Service change.
func (r *Reconciler) OnService(key types.NamespacedName, svc *model.Service) {
	id := model.ServiceID{Namespace: key.Namespace, Name: key.Name}
	r.mu.Lock()
	st := r.state(id)
	st.svc = svc
	if svc != nil {
		// Equal strings, shared: the slices delivered before this Service
		// (its lists run beside theirs) keep the copies decoded with them
		// otherwise, and every slice the ones of an older version of it.
		for _, s := range st.slices {
			s.ServiceName = svc.ID.Name
		}
	}
	r.markDirty(id)
	queue := r.delivered
	r.mu.Unlock()
	if queue {
		r.queue.Add(id)
	}
}

// markDirty remembers when a Service first became dirty; r.mu is held.
func (r *Reconciler) markDirty(id model.ServiceID) {
	if st := r.state(id); st.dirtySince.IsZero() {
		st.dirtySince = now()
	}
	if r.firstEvent.IsZero() {
		r.firstEvent = time.Now()
	}
}

// OnEndpointSlice records an EndpointSlice change and queues its Service
// (and the Service it belonged to before, if its label changed).
func (r *Reconciler) OnEndpointSlice(key types.NamespacedName, slice *model.EndpointSlice) {
	var dirty []model.ServiceID
	r.mu.Lock()
	prev, _ := r.slices.get(key.Namespace, key.Name)
	if slice != nil {
		r.triggers.record(serviceOf(key, slice), prev, slice)
	}
	if prev != nil {
		id := serviceOf(key, prev)
		st := r.state(id)
		st.slices = slices.DeleteFunc(st.slices, func(s *model.EndpointSlice) bool { return s == prev })
		r.slices.remove(key.Namespace, key.Name)
		dirty = append(dirty, id)
		r.markDirty(id)
	}
	if slice != nil {
		id := serviceOf(key, slice)
		st := r.state(id)
		// Equal strings, shared: the copy of the service-name label
		// decoded with the slice is not kept.
		if st.svc != nil {
			slice.ServiceName = st.svc.ID.Name
		}
		st.slices = append(st.slices, slice)
		r.slices.put(key.Namespace, key.Name, slice)
		dirty = append(dirty, id)
		r.markDirty(id)
	}
	queue := r.delivered
	r.mu.Unlock()
	if !queue {
		return
	}
	for _, id := range dirty {
		r.queue.Add(id)
	}
}

// serviceOf is the Service slice (whose key is key) serves: the one it
// names, in its own namespace.
func serviceOf(key types.NamespacedName, slice *model.EndpointSlice) model.ServiceID {
	return model.ServiceID{Namespace: key.Namespace, Name: slice.ServiceName}
}

// OnNode reads this node's zone from its Node object (topology-aware
// routing) and ignores other nodes; NodePort addresses come from the
// node's interfaces (SetNode).
func (r *Reconciler) OnNode(name string, node *model.NodeInfo) {
	r.mu.Lock()
	mine := name == r.thisNode.Name
	r.mu.Unlock()
	if !mine { // another node: the router's business
		return
	}
	zone := ""
	if node != nil {
		zone = node.Zone
		slog.Info("node", "name", name, "addresses", node.Addresses, "zone", zone)
	}
	changed := false
	r.updateNode(func(n *model.Node) {
		changed, n.Zone = n.Zone != zone, zone
	}, func(svc *model.Service) bool { return changed && svc.PreferClose }) // topology-aware Services choose again
}

// updateNode applies change to what the reconciler knows of this node
// (under r.mu) and syncs again the Services the change affects.
func (r *Reconciler) updateNode(change func(*model.Node), affects func(*model.Service) bool) {
	r.mu.Lock()
	change(&r.thisNode)
	var dirty []model.ServiceID
	for k, st := range r.states.all() {
		id := model.ServiceID(k)
		if st.svc != nil && affects(st.svc) {
			r.markDirty(id)
			dirty = append(dirty, id)
		}
	}
	queue := r.delivered
	r.mu.Unlock()
	if queue {
		for _, id := range dirty {
			r.queue.Add(id)
		}
	}
}

// ServiceKeys lists the Services delivered and not deleted.
func (r *Reconciler) ServiceKeys() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []types.NamespacedName
	for k, st := range r.states.all() {
		id := model.ServiceID(k)
		if st.svc != nil {
			keys = append(keys, types.NamespacedName{Namespace: id.Namespace, Name: id.Name})
		}
	}
	return keys
}

// EndpointSliceKeys lists the EndpointSlices delivered and not deleted.
func (r *Reconciler) EndpointSliceKeys() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.slices.keys()
}

// OnSynced marks the end of the source's initial state.
func (r *Reconciler) OnSynced() {
	r.mu.Lock()
	r.delivered = true
	r.mu.Unlock()
	r.queue.Add(allSynced)
	close(r.sourceDone)
}
