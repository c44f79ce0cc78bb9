package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// Reconciler keeps the policy maps equal to what the cluster's pods,
// namespaces and NetworkPolicies compile to for this node. Changes are
// collected as they arrive (the objects that changed, by name); the first
// pass compiles the whole cluster, each later one recompiles only what
// the changes touch (Compiler.Update) and writes only the keys that
// changed (SyncChanges). Nothing is written before the sources have
// delivered their initial lists: a half-known cluster would isolate pods
// without their allowing rules.
type Reconciler struct {
	maps      *cube.Maps
	node      string
	hostAddrs []netip.Addr

	mu      sync.Mutex
	cluster *Cluster
	synced  bool
	dirty   chan struct{}

	compiler *Compiler
	built    bool // compiled whole once; Update from then on
	numbered bool // numbering above what an earlier agent left (pinnedNumbers)
	swept    bool // what an earlier agent left in the maps, deleted (sweep)
	// The objects changed since the last pass, by name.
	pendingPods       map[model.PodID]struct{}
	pendingNamespaces map[string]struct{}
	pendingPolicies   map[model.PolicyID]struct{}
	pendingCluster    bool // a node changed while nodes peers are used: compile all
	// pendingClusterPolicies: ClusterNetworkPolicies changed (an Update
	// compiles the tier sets they touch, or a Compile if their networks
	// make or remove a block).
	pendingClusterPolicies map[string]struct{}
	report                 *report.Reporter // warnings; nil: logged only
	warned                 map[model.PolicyID]string
	conflicted             map[string]string // ClusterNetworkPolicies' TierConflicts reported, by name
	notApplied             map[string]string // ClusterNetworkPolicies not enforced as written, and why, by name (lastgood.go)
	// attributions: PoliciesOf's answers since the last compilation.
	attributions map[attribKey][]string

	// The CNI plugin's pods and the passes they wait for (admit.go).
	admission
	// What the last pass could not write, and whom it concerns (health.go).
	health

	syncs, failures prometheus.Counter
	duration        prometheus.Histogram
	entries         *prometheus.GaugeVec
}

var (
	_ source.PolicyHandler        = (*Reconciler)(nil)
	_ source.ClusterPolicyHandler = (*Reconciler)(nil)
)

// NewReconciler returns the reconciler of node, whose own addresses are
// hostAddrs (their traffic to its pods is always allowed).
func NewReconciler(maps *cube.Maps, node string, hostAddrs []netip.Addr) *Reconciler {
	return &Reconciler{
		maps: maps, node: node, hostAddrs: hostAddrs,
		cluster: NewCluster(), dirty: make(chan struct{}, 1),
		compiler: NewCompiler(), pendingPods: map[model.PodID]struct{}{}, pendingClusterPolicies: map[string]struct{}{}, pendingNamespaces: map[string]struct{}{},
		pendingPolicies: map[model.PolicyID]struct{}{}, warned: map[model.PolicyID]string{}, conflicted: map[string]string{}, notApplied: map[string]string{}, attributions: map[attribKey][]string{},
		admission: newAdmission(),
		syncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "netcube_policy_syncs_total",
			Help: "Passes that wrote the policy maps to match the cluster's NetworkPolicies."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "netcube_policy_sync_errors_total",
			Help: "Passes whose map writes failed (retried)."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "netcube_policy_sync_seconds",
			// From 50 µs (a pass compiles only what changed) to 9 s, by
			// factors of √2: a percentile read from the buckets is off by
			// at most 41%, not 100%.
			Help: "Time from compiling the policies to the last map write.", Buckets: prometheus.ExponentialBuckets(0.00005, math.Sqrt2, 36)}),
		entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "netcube_policy_entries",
			Help: "Entries of the policy maps, by table (identities, endpoints, rules)."}, []string{"table"}),
	}
}

// Metrics are the reconciler's collectors, and the datapath's drop
// counters by pod and reason.
func (r *Reconciler) Metrics() []prometheus.Collector {
	return []prometheus.Collector{r.syncs, r.failures, r.duration, r.entries, drops{r}}
}

var dropsDesc = prometheus.NewDesc("netcube_policy_drops_total",
	"Packets NetworkPolicy dropped, by pod and reason (ingress: no policy of the receiver allows it; egress: of the sender).",
	[]string{"namespace", "pod", "reason"}, nil)

// drops reads pol_drops when scraped.
type drops struct{ r *Reconciler }

func (d drops) Describe(ch chan<- *prometheus.Desc) { ch <- dropsDesc }

func (d drops) Collect(ch chan<- prometheus.Metric) {
	type key struct {
		pod    model.PodID
		reason string
	}
	sums := map[key]uint64{}
	err := cube.Each(d.r.maps, MapDrops, func(k datapath.PolicyDropKey, perCPU []uint64) bool {
		d.r.mu.Lock()
		pod, ok := d.r.compiler.PodOf(k.Endpoint)
		d.r.mu.Unlock()
		if !ok {
			return true
		}
		reason := "ingress"
		if k.Reason == datapath.DropEgress {
			reason = "egress"
		}
		for _, n := range perCPU {
			sums[key{pod, reason}] += n
		}
		return true
	})
	if err != nil {
		slog.Warn("reading the policy drop counters", "err", err)
		return
	}
	for k, n := range sums {
		ch <- prometheus.MustNewConstMetric(dropsDesc, prometheus.CounterValue, float64(n), k.pod.Namespace, k.pod.Name, k.reason)
	}
}

func (r *Reconciler) changed() {
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

func (r *Reconciler) OnPod(key types.NamespacedName, p *model.Pod) {
	id := model.PodID{Namespace: key.Namespace, Name: key.Name}
	r.mu.Lock()
	r.cluster.SetPod(id, r.fromAPI(id, p))
	r.pendingPods[id] = struct{}{}
	r.podSeen()
	r.mu.Unlock()
	r.changed()
}

// PodAt names the pod with address a, and its labels
// (cube.PodNamer).
func (r *Reconciler) PodAt(a netip.Addr) (model.PodID, map[string]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.cluster.PodAt(a.Unmap())
	if !ok {
		return model.PodID{}, nil, false
	}
	return p.ID, p.Labels, true
}

func (r *Reconciler) OnNamespace(name string, ns *model.Namespace) {
	r.mu.Lock()
	r.cluster.SetNamespace(name, ns)
	r.pendingNamespaces[name] = struct{}{}
	r.mu.Unlock()
	r.changed()
}

func (r *Reconciler) OnPolicy(key types.NamespacedName, p *model.Policy) {
	id := model.PolicyID{Namespace: key.Namespace, Name: key.Name}
	r.mu.Lock()
	r.cluster.SetPolicy(id, p)
	r.pendingPolicies[id] = struct{}{}
	r.mu.Unlock()
	r.changed()
}

// OnClusterPolicy takes a ClusterNetworkPolicy (nil: deleted): the next
// pass compiles the tier sets it touches (all, when its networks change
// the classes). One not read whole keeps the last good version
// (lastgood.go).
func (r *Reconciler) OnClusterPolicy(name string, p *model.ClusterPolicy) {
	r.mu.Lock()
	msg, changed := r.takeClusterPolicy(name, p)
	if changed {
		r.pendingClusterPolicies[name] = struct{}{}
	}
	r.mu.Unlock()
	r.reportClusterPolicy(name, msg)
	if changed {
		r.changed()
	}
}

// OnNode takes a node (nil: deleted): its labels and addresses are what
// a ClusterNetworkPolicy's nodes peers select, so while one has them, a
// node's change compiles all again.
func (r *Reconciler) OnNode(name string, n *model.NodeInfo) {
	r.mu.Lock()
	old := r.cluster.Nodes[name]
	r.cluster.SetNode(name, n)
	changed := r.cluster.nodesPeersUsed() && !sameNode(old, n)
	r.pendingCluster = r.pendingCluster || changed
	r.mu.Unlock()
	if changed {
		r.changed()
	}
}

func (r *Reconciler) OnNodesSynced() {}

func sameNode(a, b *model.NodeInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return maps.Equal(a.Labels, b.Labels) && slices.Equal(a.Addresses, b.Addresses)
}

// ClusterPolicyKeys are the ClusterNetworkPolicies held, and those not
// applied (their deletion clears what is reported).
func (r *Reconciler) ClusterPolicyKeys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := map[string]string{}
	maps.Copy(keys, r.notApplied)
	for name := range r.cluster.ClusterPolicies {
		keys[name] = ""
	}
	return slices.Collect(maps.Keys(keys))
}

func (r *Reconciler) OnPoliciesSynced() {
	r.mu.Lock()
	r.synced = true
	r.mu.Unlock()
	r.changed()
}

func (r *Reconciler) PodKeys() []types.NamespacedName {
	return r.keys(func(add func(ns, name string)) {
		for id := range r.cluster.Pods {
			add(id.Namespace, id.Name)
		}
	})
}

func (r *Reconciler) NamespaceKeys() []types.NamespacedName {
	return r.keys(func(add func(ns, name string)) {
		for name := range r.cluster.Namespaces {
			add("", name)
		}
	})
}

func (r *Reconciler) PolicyKeys() []types.NamespacedName {
	return r.keys(func(add func(ns, name string)) {
		for id := range r.cluster.Policies {
			add(id.Namespace, id.Name)
		}
	})
}

// keys lists what each calls add with, under the lock.
func (r *Reconciler) keys(each func(add func(ns, name string))) []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []types.NamespacedName
	each(func(ns, name string) { out = append(out, types.NamespacedName{Namespace: ns, Name: name}) })
	return out
}

// Run applies changes until ctx ends; a failed pass is retried with
// backoff.
func (r *Reconciler) Run(ctx context.Context) {
	retry := time.Duration(0)
	for {
		var wait <-chan time.Time
		if retry > 0 {
			wait = time.After(retry)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.dirty:
		case <-wait:
		}
		if err := r.pass(); err != nil {
			r.failures.Inc()
			retry = min(max(2*retry, 50*time.Millisecond), 10*time.Second)
			slog.Error("policy maps not written; retrying", "err", err, "in", retry)
			continue
		}
		retry = 0
	}
}

// pass compiles what changed and writes the keys that did. The tables
// are read outside the lock while written to the maps: only pass changes
// them, and passes run one at a time (Run).
func (r *Reconciler) pass() error {
	start := time.Now()
	if !r.built && !r.numbered {
		// Before the first compilation: above the numbers an earlier
		// agent left (only pass reads or sets built and numbered).
		ep, rs, id, err := pinnedNumbers(r.maps)
		if err != nil {
			return fmt.Errorf("read the numbers an earlier agent left in the policy maps: %w", err)
		}
		r.mu.Lock()
		r.compiler.NumberAbove(ep, rs, id)
		r.mu.Unlock()
		r.numbered = true
	}
	r.mu.Lock()
	if !r.synced {
		r.mu.Unlock()
		return nil
	}
	if !r.built || r.pendingCluster || r.compiler.TakeClusterPolicies(slices.Collect(maps.Keys(r.pendingClusterPolicies))) {
		r.compiler.Compile(r.cluster, func(p *model.Pod) bool { return p.Node == r.node }, r.hostAddrs)
		r.built, r.pendingCluster = true, false
	} else {
		r.compiler.Update(slices.Collect(maps.Keys(r.pendingPods)), slices.Collect(maps.Keys(r.pendingNamespaces)),
			slices.Collect(maps.Keys(r.pendingPolicies)))
	}
	clear(r.pendingClusterPolicies)
	clear(r.pendingPods)
	clear(r.pendingNamespaces)
	clear(r.pendingPolicies)
	seq := r.admitSeq
	t, ch := r.compiler.Tables(), r.compiler.Changes()
	clear(r.attributions)
	r.mu.Unlock()
	err := SyncChanges(r.maps, t, ch)
	var se *SyncError
	if err != nil && !errors.As(err, &se) {
		r.mu.Lock()
		r.compiler.Requeue(ch)
		r.mu.Unlock()
		return err
	}
	r.mu.Lock()
	if se != nil {
		// Written as far as it could be, the rest quarantined: the next
		// pass tries the keys again, and gives the quarantined their
		// own entries back once they fit.
		r.quarantineUnselected(t, se)
		r.compiler.Requeue(ch)
		r.compiler.Requeue(Changes{Endpoints: union(se.Quarantined, se.Open)})
	}
	r.passWritten(seq, se)
	r.mu.Unlock()
	if se != nil {
		return se
	}
	if !r.swept {
		n, err := sweep(r.maps, t)
		if err != nil {
			return fmt.Errorf("delete what an earlier agent left in the policy maps: %w", err)
		}
		r.swept = true
		if n > 0 {
			slog.Info("deleted what an earlier agent left in the policy maps and this cluster no longer gives", "keys", n)
		}
	}
	r.syncs.Inc()
	r.duration.Observe(time.Since(start).Seconds())
	r.entries.WithLabelValues("identities").Set(float64(len(t.Peers)))
	r.entries.WithLabelValues("endpoints").Set(float64(len(t.Endpoints)))
	r.entries.WithLabelValues("rules").Set(float64(len(t.Entries) + len(t.Verdicts)))
	r.reportWarnings(t.Warnings)
	r.reportTierConflicts(r.compiler.TierConflicts())
	return nil
}

// reportTierConflicts reports each conflict on both policies (an Event
// naming the other), and clears those gone.
func (r *Reconciler) reportTierConflicts(cs []TierConflict) {
	now := map[string]string{}
	for _, c := range cs {
		for _, name := range []string{c.First, c.Second} {
			if now[name] != "" {
				now[name] += "; "
			}
			now[name] += c.String()
		}
	}
	for name, msg := range now {
		if r.conflicted[name] == msg {
			continue
		}
		if r.report == nil {
			slog.Warn("ClusterNetworkPolicies conflict", "policy", name, "problem", msg)
		} else {
			r.report.Set(clusterPolicyObject(name), report.TierConflict, msg)
		}
	}
	for name := range r.conflicted {
		if _, ok := now[name]; !ok && r.report != nil {
			r.report.Clear(clusterPolicyObject(name), report.TierConflict)
		}
	}
	r.conflicted = now
}

func clusterPolicyObject(name string) report.Object {
	return report.Object{Kind: "ClusterNetworkPolicy", Name: name}
}

// SetReporter makes the reconciler report what policies name but nothing
// matches to rep (logged, counted, an Event on the policy); call before
// Run.
func (r *Reconciler) SetReporter(rep *report.Reporter) { r.report = rep }

// reportWarnings reports each policy's warnings when they change, and
// clears those of policies that have none any more.
func (r *Reconciler) reportWarnings(ws []Warning) {
	now := map[model.PolicyID]string{}
	for _, w := range ws {
		if now[w.Policy] != "" {
			now[w.Policy] += "; "
		}
		now[w.Policy] += w.Msg
	}
	for id, msg := range now {
		if r.warned[id] == msg {
			continue
		}
		if r.report == nil {
			slog.Warn("NetworkPolicy matches nothing", "policy", id.String(), "problem", msg)
		} else {
			r.report.Set(policyObject(id), report.UnmatchedPort, msg)
		}
	}
	for id := range r.warned {
		if _, ok := now[id]; !ok && r.report != nil {
			r.report.Clear(policyObject(id), report.UnmatchedPort)
		}
	}
	r.warned = now
}

func policyObject(id model.PolicyID) report.Object {
	return report.Object{Kind: "NetworkPolicy", Namespace: id.Namespace, Name: id.Name}
}

// PodsPath is where the agent's local API lists the cluster's pods:
// {"namespace/name": {"ips": [...], "node": "...", "labels": {...}}}
// (netcube trace names
// a pod by it).
const PodsPath = "/v1/pods"

// PodInfo is a pod as /v1/pods lists it.
type PodInfo struct {
	IPs    []netip.Addr      `json:"ips"`
	Node   string            `json:"node"`
	Labels map[string]string `json:"labels,omitempty"`
}

func (r *Reconciler) podsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		out := make(map[string]PodInfo, len(r.cluster.Pods))
		for id, p := range r.cluster.Pods {
			out[id.String()] = PodInfo{IPs: p.IPs, Node: p.Node, Labels: p.Labels}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}
