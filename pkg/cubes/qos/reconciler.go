package qos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// Reconciler keeps the maps in step with the NetworkSlices, namespaces
// and pods: each change marks the state dirty, and Run places every pod
// of the node again (a few hundred pods and slices: microseconds) and
// writes what changed.
type Reconciler struct {
	mu     sync.Mutex
	st     State
	assign *Assigner
	tables *Tables
	report *report.Reporter
	// reported: the problems standing, so that a resolved one is cleared.
	reported map[problem]bool
	kick     chan struct{}
	// podsSynced, slicesSynced: the sources' first lists are all here.
	// Nothing is applied before both: the first apply sweeps the maps,
	// and would take an earlier agent's pods out of their slices for the
	// moment their slice or the pods were still on their way.
	podsSynced, slicesSynced bool
	metrics                  *metrics
	// onApplied, if set, is told after each apply whether any pod has a
	// slice or a rate (the uplinks' queueing follows it).
	onApplied func(active, queue bool, classes map[uint32]BucketClass) error
	// onShaped, if set, is told after each apply which pods receive at a
	// rate of their own (their veths' shapers follow it).
	onShaped func(map[model.PodID]IngressShape) error
}

// NewReconciler places the pods of node into the maps of tables.
func NewReconciler(node string, tables *Tables, rep *report.Reporter) *Reconciler {
	return &Reconciler{
		st:     State{Slices: map[string]*model.Slice{}, Namespaces: map[string]map[string]string{}, Pods: map[model.PodID]*model.Pod{}},
		assign: NewAssigner(node), tables: tables, report: rep, reported: map[problem]bool{}, kick: make(chan struct{}, 1),
		metrics: newMetrics(),
	}
}

// problem is a reported object and why.
type problem struct {
	obj    report.Object
	reason report.Reason
}

func (r *Reconciler) changed() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// OnSlice: a NetworkSlice (nil: deleted, or invalid and new).
func (r *Reconciler) OnSlice(name string, s *model.Slice) {
	r.mu.Lock()
	if s == nil {
		delete(r.st.Slices, name)
	} else {
		r.st.Slices[name] = s
	}
	r.mu.Unlock()
	r.changed()
}

// OnSlicesSynced: every NetworkSlice has been delivered once.
func (r *Reconciler) OnSlicesSynced() {
	r.mu.Lock()
	r.slicesSynced = true
	r.mu.Unlock()
	r.changed()
}

// OnPodsSynced: every pod and namespace has been delivered once.
func (r *Reconciler) OnPodsSynced() {
	r.mu.Lock()
	r.podsSynced = true
	r.mu.Unlock()
	r.changed()
}

func (r *Reconciler) synced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.podsSynced && r.slicesSynced
}

// SliceKeys lists the slices held.
func (r *Reconciler) SliceKeys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.st.Slices))
	for n := range r.st.Slices {
		out = append(out, n)
	}
	return out
}

// OnPod: a pod (nil: deleted, or finished; with no address yet: none).
func (r *Reconciler) OnPod(key types.NamespacedName, p *model.Pod) {
	id := model.PodID{Namespace: key.Namespace, Name: key.Name}
	r.mu.Lock()
	if p == nil {
		delete(r.st.Pods, id)
	} else {
		r.st.Pods[id] = p
	}
	r.mu.Unlock()
	r.changed()
}

// OnNamespace: a namespace's labels (nil: deleted).
func (r *Reconciler) OnNamespace(name string, ns *model.Namespace) {
	r.mu.Lock()
	if ns == nil {
		delete(r.st.Namespaces, name)
	} else {
		r.st.Namespaces[name] = ns.Labels
	}
	r.mu.Unlock()
	r.changed()
}

// Run applies the state after each change (a burst of changes once),
// from the moment the pods and slices are synced, until ctx ends; a
// failed apply is retried a second later.
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
		if !r.synced() {
			continue
		}
		time.Sleep(20 * time.Millisecond) // let a burst (a sync) arrive
		if err := r.Apply(); err != nil {
			slog.Error("network slices: applying", "err", err)
			retry.Reset(time.Second)
		}
	}
}

// Apply places every pod and writes the maps now.
func (r *Reconciler) Apply() error {
	r.mu.Lock()
	d, conflicts, errs := r.assign.Assign(r.st)
	placed := r.assign.Placement()
	r.mu.Unlock()
	if r.metrics != nil {
		r.metrics.set(placed)
	}
	r.reportProblems(conflicts, errs)
	if err := r.tables.Apply(d); err != nil {
		return err
	}
	var failed []error
	if r.onShaped != nil {
		failed = append(failed, r.onShaped(d.Shaped))
	}
	if r.onApplied != nil {
		failed = append(failed, r.onApplied(len(d.Pods) > 0, d.Queue, d.Classes))
	}
	return errors.Join(failed...)
}

// reportProblems reports each conflict on the slice a pod was not put in,
// each error on its object, and clears what no longer stands.
func (r *Reconciler) reportProblems(conflicts []Conflict, refused []Refused) {
	if r.report == nil {
		return
	}
	now := map[problem]string{}
	for _, c := range conflicts {
		p := problem{report.Object{Kind: "NetworkSlice", Name: c.Other}, report.SliceConflict}
		now[p] = joinMsg(now[p], c.String())
	}
	for _, f := range refused {
		p := problem{f.Object, report.MapFull}
		now[p] = joinMsg(now[p], f.Err.Error())
	}
	for p, msg := range now {
		r.report.Set(p.obj, p.reason, msg)
	}
	for p := range r.reported {
		if _, ok := now[p]; !ok {
			r.report.Clear(p.obj, p.reason)
		}
	}
	r.reported = map[problem]bool{}
	for p := range now {
		r.reported[p] = true
	}
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	parts := []string{a, b}
	slices.Sort(parts)
	return fmt.Sprintf("%s; %s", parts[0], parts[1])
}
