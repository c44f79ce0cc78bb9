package lb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// LoadBalancer is what the reconciler programs (the lb cube).
type LoadBalancer interface {
	// Apply makes a frontend load-balance over its backends, with its
	// options; it writes nothing when the datapath already has that.
	Apply(fb model.FrontendBackends) error
	// UpsertAll is Apply for many frontends at once (batched map writes);
	// on failure it leaves none of the frontends it did not have.
	UpsertAll(items []model.FrontendBackends) error
	Delete(fe model.Frontend) error
	Frontends() []model.Frontend
}

// HealthChecks serve the health-check ports of Services with
// externalTrafficPolicy Local (pkg/healthcheck); optional.
type HealthChecks interface {
	Set(id model.ServiceID, port uint16, localEndpoints int) error
	Delete(id model.ServiceID)
}

// Advertiser is told, after each Service sync, what of the Service a
// routing protocol may announce from this node (the BGP speaker,
// pkg/bgp); optional. Delete: the Service is gone or announces nothing.
type Advertiser interface {
	SetService(id model.ServiceID, a Advertised)
	DeleteService(id model.ServiceID)
}

// Advertised is a Service's addresses as this node's datapath serves
// them: the LoadBalancer IPs are those the pool guard passed (a node
// never announces an address no pool gave), and LocalEndpoints says
// whether a Local Service has a ready endpoint here.
type Advertised struct {
	ClusterIPs, ExternalIPs, LoadBalancerIPs []netip.Addr
	LocalOnly                                bool // externalTrafficPolicy Local
	LocalEndpoints                           int  // ready endpoints on this node
	Labels                                   map[string]string
}

// Observer is told about every Service sync (metrics); optional. pending is
// how long the Service waited since the first change that made it dirty
// arrived; took is the sync itself. Programmed is told, for each endpoint
// change a sync programmed, the time from the change's trigger (its
// EndpointSlice's last-change-trigger-time) to the sync's last map write:
// network programming latency, as Kubernetes defines it.
type Observer interface {
	ServiceSynced(pending, took time.Duration, err error)
	Programmed(sinceTrigger time.Duration)
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
	health   HealthChecks
	adv      Advertiser
	report   *report.Reporter // frontend conflicts; nil: not reported
	elector  Elector          // who announces each LoadBalancer IP; nil: every eligible node
	queue    workqueue.TypedRateLimitingInterface[model.ServiceID]

	mu sync.Mutex // guards the maps and the fields below the source writes
	// states is the cluster view, one entry per Service (one map, not one
	// per aspect: at 100,000 Services each map costs ~10 MB).
	states byName[*serviceState]
	// slices holds each EndpointSlice as last delivered: a deletion or a
	// relabelled slice is removed from the Service it belonged to.
	slices byName[*model.EndpointSlice]
	// delivered: the source's initial state is complete; changes are
	// queued from then on (before, they are only marked dirty and applied
	// together by the initial sync).
	delivered bool
	failures  map[model.ServiceID]error
	thisNode  model.Node // NodePort addresses, and which endpoints are local
	// owners: which Service programs each frontend (the worker's).
	owners owners

	synced chan struct{} // closed after the first full sync
	// sourceDone is closed when the source has delivered its initial state.
	// No Service is applied before: a Service listed before its
	// EndpointSlices would be programmed without backends for a moment,
	// rejecting new connections and moving established ones.
	sourceDone chan struct{}
	// The initial sync, measured: when the first change arrived, and the
	// time spent applying Services until the first full sync was done.
	firstEvent  time.Time
	initialSync InitialSync
	// triggers: the trigger times (Unix ns) of the endpoint changes not
	// yet programmed, by Service (triggers.go). Apart from the states:
	// almost always empty.
	triggers triggerTimes
}

var _ source.Handler = (*Reconciler)(nil)

// serviceState is what the reconciler knows of one Service. The source
// writes svc, slices and dirtySince under Reconciler.mu; applied belongs to
// the worker. Only the worker removes a state (forget), once it is empty.
type serviceState struct {
	svc        *model.Service // nil: not (or no longer) a Service netcube programs
	slices     []*model.EndpointSlice
	dirtySince dirtySince   // when the first unapplied change arrived; zero: clean
	applied    frontendKeys // what the datapath has (the lb cube knows their backends)
}

// frontendKeys lists frontends by their keys in lb_services (ownerKey): 24
// bytes each and no pointer, where a model.Frontend takes 32 with one, so
// that the collector does not scan these lists (there is one per Service:
// 1.6 MB less at 100,000 dual-stack Services).
type frontendKeys []datapath.ServiceKey

// dirtySince is a time as nanoseconds on the process's monotonic clock (8
// bytes where a time.Time takes 24: there is one per Service); 0 means none.
type dirtySince int64

var processStart = time.Now()

func now() dirtySince { return dirtySince(time.Since(processStart)) + 1 }

func (d dirtySince) IsZero() bool    { return d == 0 }
func (d dirtySince) Time() time.Time { return processStart.Add(time.Duration(d - 1)) }

// state returns id's state, creating it; r.mu is held.
func (r *Reconciler) state(id model.ServiceID) *serviceState {
	st := r.existing(id)
	if st == nil {
		st = &serviceState{}
		r.states.put(id.Namespace, id.Name, st)
	}
	return st
}

// existing returns id's state, nil if it has none; r.mu is held.
func (r *Reconciler) existing(id model.ServiceID) *serviceState {
	st, _ := r.states.get(id.Namespace, id.Name)
	return st
}

// New returns a reconciler programming lb; observer may be nil.
func NewReconciler(lb LoadBalancer, observer Observer) *Reconciler {
	return &Reconciler{
		lb:       lb,
		observer: observer,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[model.ServiceID](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[model.ServiceID]{Name: "services"}),
		states:     newByName[*serviceState](),
		slices:     newByName[*model.EndpointSlice](),
		failures:   map[model.ServiceID]error{},
		owners:     newOwners(),
		synced:     make(chan struct{}),
		sourceDone: make(chan struct{}),
		triggers:   newTriggerTimes(),
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
		r.initialSyncOnce()
		r.queue.Forget(id)
		return nil
	}
	r.mu.Lock()
	st := r.state(id)
	since, ok := st.dirtySince.Time(), !st.dirtySince.IsZero()
	st.dirtySince = 0 // a change arriving from here on is a new one
	triggered := r.triggers.take(id)
	r.mu.Unlock()
	start := time.Now()
	err := errors.Join(r.syncService(id, st), r.syncHealthCheck(id))
	r.syncAdvertised(id)
	if err == nil {
		r.programmed(triggered)
	} else {
		r.mu.Lock()
		r.triggers.giveBack(id, triggered)
		r.mu.Unlock()
	}
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
		r.forgetIfEmpty(id, st)
	}
	r.mu.Unlock()
	r.reportFull(id, err)
	if err != nil {
		r.queue.AddRateLimited(id)
		return err
	}
	r.queue.Forget(id)
	return nil
}

// reportFull reports a Service that does not fit in a map (MapFull: on
// the Service, and counted), and clears it once it is applied; it is
// retried meanwhile, so it goes in when room returns.
func (r *Reconciler) reportFull(id model.ServiceID, err error) {
	if r.report == nil {
		return
	}
	var full *cube.MapFullError
	msg := ""
	if errors.As(err, &full) {
		msg = err.Error() + " (retried until there is room; the Service's other frontends and every other Service are untouched)"
	}
	r.report.Set(report.Object{Kind: "Service", Namespace: id.Namespace, Name: id.Name}, report.MapFull, msg)
}

// syncService makes one Service's frontends in the datapath match the
// cluster's view of it: those it owns (owners.go) are applied, those it no
// longer wants are deleted unless another Service now owns them. Upsert
// writes only what differs from what the lb cube has, so unchanged
// frontends cost no map writes.
func (r *Reconciler) syncService(id model.ServiceID, st *serviceState) error {
	r.mu.Lock()
	wanted := r.wanted(st)
	fes := frontendsOf(wanted)
	won, changed := r.claim(id, fes, st.applied)
	r.reportConflicts(id, fes, &won)
	have := st.applied
	ownedElsewhere := map[datapath.ServiceKey]bool{}
	for _, k := range have {
		if owner, ok := r.owners.ownerOf(k); ok && owner != id {
			ownedElsewhere[k] = true // its owner programs it over ours
		}
	}
	r.mu.Unlock()
	r.resync(changed)

	// kept is rebuilt as the frontends go: on an error it holds what may
	// be in the maps, for the retry to start from.
	var kept frontendKeys
	defer func() { st.applied = kept }()
	for i, k := range have {
		fe := frontendOf(k)
		switch {
		case won.has(fe):
			kept = append(kept, k)
		case ownedElsewhere[k]:
		default:
			if err := r.lb.Delete(fe); err != nil {
				kept = append(kept, have[i:]...)
				return fmt.Errorf("service %s: %w", id, err)
			}
		}
	}
	for _, f := range wanted {
		if !won.has(f.Frontend) {
			continue
		}
		if k := ownerKey(f.Frontend); !slices.Contains(kept, k) {
			kept = append(kept, k) // before Apply: a failed one is retried or deleted
		}
		if err := r.lb.Apply(f); err != nil {
			return fmt.Errorf("service %s: %w", id, err)
		}
	}
	return nil
}

// resync queues Services whose share of a contended frontend changed.
func (r *Reconciler) resync(ids []model.ServiceID) {
	if len(ids) == 0 {
		return
	}
	r.mu.Lock()
	for _, id := range ids {
		r.markDirty(id)
	}
	queue := r.delivered
	r.mu.Unlock()
	if queue {
		for _, id := range ids {
			r.queue.Add(id)
		}
	}
}

// wanted is what the Service should be programmed as now; r.mu is held.
func (r *Reconciler) wanted(st *serviceState) model.Frontends {
	return ElectedFrontends(st.svc, st.slices, r.thisNode, r.elector)
}

// SetElector makes only the node el elects answer ARP and NDP for each
// LoadBalancer IP (nil: every eligible node); call before Run, and
// ResyncLoadBalancers whenever el's view changes.
func (r *Reconciler) SetElector(el Elector) {
	r.mu.Lock()
	r.elector = el
	r.mu.Unlock()
}

// ResyncLoadBalancers syncs again the Services with LoadBalancer IPs, and
// those with ExternalIPs and session affinity (the elector's view changed:
// lb_announce and what BGP announces follow).
func (r *Reconciler) ResyncLoadBalancers() {
	r.updateNode(func(*model.Node) {}, func(svc *model.Service) bool {
		return svc.External != nil && (len(svc.External.LoadBalancerIPs) > 0 || svc.Affinity != 0 && len(svc.External.IPs) > 0)
	})
}

// SetReporter makes the reconciler report frontend conflicts to rep; call
// before Run.
func (r *Reconciler) SetReporter(rep *report.Reporter) { r.report = rep }

// SetHealthChecks makes the reconciler keep hc's ports in step with the
// Services; call before Run.
func (r *Reconciler) SetHealthChecks(hc HealthChecks) { r.health = hc }

// SetAdvertiser makes the reconciler tell a what each Service may
// announce; call before Run.
func (r *Reconciler) SetAdvertiser(a Advertiser) { r.adv = a }

// syncAdvertised tells the advertiser what the Service announces now.
func (r *Reconciler) syncAdvertised(id model.ServiceID) {
	if r.adv == nil {
		return
	}
	r.mu.Lock()
	var a Advertised
	st := r.existing(id)
	if st != nil && st.svc != nil {
		a.ClusterIPs = st.svc.ClusterIPs()
		if ext := st.svc.External; ext != nil {
			a.ExternalIPs, a.LoadBalancerIPs, a.LocalOnly, a.Labels = ext.IPs, ext.LoadBalancerIPs, ext.LocalOnly, ext.Labels
			a.LocalEndpoints = LocalEndpoints(st.slices, r.thisNode.Name)
			if st.svc.Affinity != 0 && r.elector != nil {
				a.LoadBalancerIPs = r.electedOnly(st, a.LoadBalancerIPs)
				a.ExternalIPs = r.electedOnly(st, a.ExternalIPs)
			}
		}
	}
	r.mu.Unlock()
	if len(a.ClusterIPs)+len(a.ExternalIPs)+len(a.LoadBalancerIPs) == 0 {
		r.adv.DeleteService(id)
		return
	}
	r.adv.SetService(id, a)
}

// electedOnly keeps of a ClientIP-affinity Service's external addresses
// those the elector gives this node; r.mu is held. Session affinity is a
// table on each node, so a client's connections must all reach one node:
// a router spreading them by ports over every node that announces the
// address (ECMP) sends them to several tables, and to several backends.
// So such an address is announced by one node, elected as for L2 among
// the eligible ones, and moves when that node dies, as an L2 address
// does (its clients' affinity starts again there).
func (r *Reconciler) electedOnly(st *serviceState, addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	local := st.svc.External.LocalOnly
	for _, ip := range addrs {
		var candidates []string
		if local {
			candidates = endpointNodes(ip.Is6(), st.slices)
		}
		if r.elector.Elected(ip, !local, candidates) {
			out = append(out, ip)
		}
	}
	return out
}

// syncHealthCheck opens, updates or closes the Service's health-check port.
func (r *Reconciler) syncHealthCheck(id model.ServiceID) error {
	if r.health == nil {
		return nil
	}
	r.mu.Lock()
	port, local := uint16(0), 0
	if st := r.existing(id); st != nil && st.svc != nil && st.svc.External != nil {
		port = st.svc.External.HealthCheckNodePort
		local = LocalEndpoints(st.slices, r.thisNode.Name)
	}
	r.mu.Unlock()
	if port == 0 {
		r.health.Delete(id)
		return nil
	}
	return r.health.Set(id, port, local)
}

// SetNode tells the reconciler this node's name and NodePort addresses;
// Services reached from outside are synced again.
func (r *Reconciler) SetNode(n model.Node) {
	r.updateNode(func(have *model.Node) {
		n.Zone = have.Zone // from the Node object (OnNode)
		*have = n
	}, func(svc *model.Service) bool { return svc.External != nil })
}

// forgetIfEmpty drops the state of a Service that is gone, has no slices
// left and nothing in the datapath; r.mu is held, by the worker.
func (r *Reconciler) forgetIfEmpty(id model.ServiceID, st *serviceState) {
	if st.svc == nil && len(st.slices) == 0 && len(st.applied) == 0 && st.dirtySince.IsZero() {
		r.states.remove(id.Namespace, id.Name)
	}
}

// Failures returns the Services that could not be applied, with why.
func (r *Reconciler) Failures() map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]error, len(r.failures))
	for id, err := range r.failures {
		out[id.String()] = err
	}
	return out
}

// Pending is the number of Services waiting to be synced.
func (r *Reconciler) Pending() int { return r.queue.Len() }
