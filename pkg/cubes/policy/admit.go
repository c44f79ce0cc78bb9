package policy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/netcube/netcube/pkg/model"
)

// A pod's policy is written before its CNI ADD returns, so the datapath
// judges it from its first packet. The API's Pod status gives a pod's
// addresses only after the runtime has started it; this node allocated
// them, so the plugin's call (AdmitPod) gives them first, and the Pod's
// labels come from the cache the API fills.

// AdmitTimeout bounds AdmitPod: the pod's wait for the cache to hold it
// and for the pass that writes it. Below the plugin's call timeout
// (pkg/cni), so that the plugin hears why.
var AdmitTimeout = 8 * time.Second

// ErrNotSynced: the first whole pass has not written the maps yet, so no
// pod can be admitted (its peers' identities and its rules may be
// missing).
var ErrNotSynced = errors.New("the agent has not finished its first policy sync")

// admission is the reconciler's side of the CNI plugin's pods: the
// addresses it allocated them, and the passes their ADDs wait for. Its
// fields are guarded by Reconciler.mu.
type admission struct {
	// local: this node's pods the plugin wired, their sandbox and
	// addresses, which override the API's status (missing until the pod
	// runs, or a sandbox behind after the pod's sandbox was made again).
	local map[model.PodID]localPod
	// apiPods: this node's pods as the API gave them.
	apiPods map[model.PodID]*model.Pod
	// seen is closed and replaced at each pod the API gives.
	seen chan struct{}
	// admitSeq counts admissions; writtenSeq is the count the last pass
	// that wrote the maps had compiled, and written is closed and
	// replaced after each such pass.
	admitSeq, writtenSeq uint64
	written              chan struct{}
	// first is closed once the first whole pass has written the maps.
	first       chan struct{}
	firstClosed bool
	// last: what the last pass that wrote could not (nil: everything).
	last *SyncError
}

type localPod struct {
	sandbox string
	addrs   []netip.Addr
}

func newAdmission() admission {
	return admission{local: map[model.PodID]localPod{}, apiPods: map[model.PodID]*model.Pod{},
		seen: make(chan struct{}), written: make(chan struct{}), first: make(chan struct{})}
}

// PolicySynced is closed once the first whole pass has written the maps:
// until then the CNI socket admits no pod.
func (r *Reconciler) PolicySynced() <-chan struct{} { return r.first }

// fromAPI records p, the API's pod id (nil: deleted), and returns the pod
// the cluster holds: for a pod of this node the plugin wired, with the
// addresses it was given.
func (r *Reconciler) fromAPI(id model.PodID, p *model.Pod) *model.Pod {
	if p == nil {
		delete(r.apiPods, id)
		delete(r.local, id) // a pod of that name made again is wired again
		return nil
	}
	if p.Node != r.node {
		delete(r.apiPods, id)
		return p
	}
	r.apiPods[id] = p
	return r.withLocalAddrs(id, p)
}

func (r *Reconciler) withLocalAddrs(id model.PodID, p *model.Pod) *model.Pod {
	lp, ok := r.local[id]
	if !ok || p == nil || p.HostNetwork || slices.Equal(p.IPs, lp.addrs) {
		return p
	}
	q := *p
	q.IPs = slices.Clone(lp.addrs)
	return &q
}

// podSeen wakes the admissions waiting for a pod to reach the cache.
func (r *Reconciler) podSeen() {
	close(r.seen)
	r.seen = make(chan struct{})
}

// passWritten records a pass that wrote the maps (se: what it could not)
// after compiling admissions up to seq, and wakes their ADDs.
func (r *Reconciler) passWritten(seq uint64, se *SyncError) {
	r.writtenSeq, r.last = seq, se
	close(r.written)
	r.written = make(chan struct{})
	if !r.firstClosed {
		close(r.first)
		r.firstClosed = true
	}
	r.setHealth(se)
}

// AdmitPod writes the policy of pod id, which the CNI plugin is wiring
// in sandbox with addrs (allocated on this node), and returns once it is
// in the maps: its endpoint entry if a policy selects it, its
// addresses' identity. It fails, and the ADD with it (the runtime tries
// again), before the first whole pass, when the cache does not hold the
// pod within AdmitTimeout, when the pod is another node's, and when its
// entries could not be written (then they are quarantined, not open).
func (r *Reconciler) AdmitPod(ctx context.Context, id model.PodID, sandbox string, addrs []netip.Addr) error {
	ctx, cancel := context.WithTimeout(ctx, AdmitTimeout)
	defer cancel()
	r.mu.Lock()
	if !r.firstClosed {
		r.mu.Unlock()
		return ErrNotSynced
	}
	// A pod not bound yet in the cache (its binding's update still on
	// its way) is waited for as one not there.
	for p := r.cluster.Pods[id]; p == nil || p.Node == ""; p = r.cluster.Pods[id] {
		seen := r.seen
		r.mu.Unlock()
		select {
		case <-seen:
		case <-ctx.Done():
			return fmt.Errorf("pod %s: not in the agent's cache of the API's pods after %s, so its NetworkPolicy cannot be written", id, AdmitTimeout)
		}
		r.mu.Lock()
	}
	if p := r.cluster.Pods[id]; p.Node != r.node {
		r.mu.Unlock()
		return fmt.Errorf("pod %s: spec.nodeName is %q, not this node (%s): refused", id, p.Node, r.node)
	}
	r.local[id] = localPod{sandbox: sandbox, addrs: slices.Clone(addrs)}
	r.cluster.SetPod(id, r.withLocalAddrs(id, r.apiPods[id]))
	r.pendingPods[id] = struct{}{}
	r.admitSeq++
	seq := r.admitSeq
	r.mu.Unlock()
	r.changed()
	for {
		r.mu.Lock()
		if r.writtenSeq >= seq {
			err := r.admitted(id, addrs)
			r.mu.Unlock()
			return err
		}
		written := r.written
		r.mu.Unlock()
		select {
		case <-written:
		case <-ctx.Done():
			return fmt.Errorf("pod %s: its NetworkPolicy was not written within %s", id, AdmitTimeout)
		}
	}
}

// admitted says whether the last pass wrote pod id's entries for addrs.
func (r *Reconciler) admitted(id model.PodID, addrs []netip.Addr) error {
	if r.last == nil {
		return nil
	}
	for _, a := range addrs {
		_, q := r.last.Quarantined[a]
		_, open := r.last.Open[a]
		if q || open {
			return fmt.Errorf("pod %s: its NetworkPolicy could not be written: %w", id, r.last)
		}
	}
	return nil
}

// ForgetPod forgets the addresses of the pod wired in sandbox (its DEL):
// the pod is as the API says again.
func (r *Reconciler) ForgetPod(sandbox string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, lp := range r.local {
		if lp.sandbox != sandbox {
			continue
		}
		delete(r.local, id)
		if p := r.apiPods[id]; p != nil {
			r.cluster.SetPod(id, p)
			r.pendingPods[id] = struct{}{}
		}
		defer r.changed()
	}
}
