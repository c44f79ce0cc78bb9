package lb

// Network programming latency, as Kubernetes defines it (the
// sig-scalability SLI, kube-proxy's
// kubeproxy_network_programming_duration_seconds): from the moment a
// change to a Service's endpoints was triggered (a pod became ready, or
// went; the EndpointSlice controller writes that moment into the slice's
// endpoints.kubernetes.io/last-change-trigger-time annotation) to the moment
// this node's datapath has it (the Service's sync done). Each slice version
// with a new trigger time counts once, when the sync that programmed it
// ends.

import (
	"time"

	"github.com/netcube/netcube/pkg/model"
)

// triggerTimes are the trigger times of the endpoint changes delivered and
// not yet programmed, by Service; guarded by Reconciler.mu.
type triggerTimes struct {
	// since: changes triggered before the agent started are not counted
	// (as kube-proxy does): a restarted agent's first list would otherwise
	// report the age of every slice.
	since   int64
	pending map[model.ServiceID][]int64
}

func newTriggerTimes() triggerTimes {
	return triggerTimes{since: time.Now().UnixNano(), pending: map[model.ServiceID][]int64{}}
}

// record notes the trigger time of slice, delivered for Service id over
// prev (nil: new): a slice delivered again as it was (a relist) is not a
// new change.
func (t *triggerTimes) record(id model.ServiceID, prev, slice *model.EndpointSlice) {
	at := slice.ChangeTriggered
	if at == 0 || at < t.since || (prev != nil && prev.ChangeTriggered == at) {
		return
	}
	t.pending[id] = append(t.pending[id], at)
}

// take returns Service id's pending trigger times and forgets them: the
// sync about to run programs those changes.
func (t *triggerTimes) take(id model.ServiceID) []int64 {
	at, ok := t.pending[id]
	if ok {
		delete(t.pending, id)
	}
	return at
}

// giveBack returns trigger times a failed sync took, for its retry.
func (t *triggerTimes) giveBack(id model.ServiceID, at []int64) {
	if len(at) > 0 {
		t.pending[id] = append(at, t.pending[id]...)
	}
}

// programmed tells the observer how long ago each change was triggered,
// now that it is programmed.
func (r *Reconciler) programmed(triggered []int64) {
	if r.observer == nil || len(triggered) == 0 {
		return
	}
	now := time.Now().UnixNano()
	for _, at := range triggered {
		// Another machine's clock wrote the trigger time: a little ahead
		// of ours reads as no latency, not a negative one.
		r.observer.Programmed(time.Duration(max(0, now-at)))
	}
}

// programmedInitially reports the changes the initial sync programmed:
// every Service with pending trigger times that is clean now (one whose
// batch failed was marked dirty again, and reports when its own sync
// succeeds).
func (r *Reconciler) programmedInitially() {
	var done []int64
	r.mu.Lock()
	for id, at := range r.triggers.pending {
		if st := r.existing(id); st == nil || st.dirtySince.IsZero() {
			done = append(done, at...)
			delete(r.triggers.pending, id)
		}
	}
	r.mu.Unlock()
	r.programmed(done)
}
