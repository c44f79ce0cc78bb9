// Package kube is a Source watching a Kubernetes API server: a paged list
// then a watch (or, with WatchList, one watch that begins with every
// object) for Services and EndpointSlices (stream), with kube-proxy's
// label selectors (Services of another proxy, and headless Services, are
// never even listed), whose objects are converted to netcube's model on
// arrival and handed on, never cached; every Node object; and, for the
// cubes that want them, pods, namespaces, NetworkPolicies and netcube's
// NetworkSlices (a CRD, which may not be installed).
// The initial state is declared complete only once every listed object has
// been delivered. Failed API requests are retried with backoff here; failed
// map writes, in the reconciler's workqueue.
package kube

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// Labels kube-proxy selects on.
const (
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelHeadless         = corev1.IsHeadlessService // service.kubernetes.io/headless
)

// Source watches an API server.
type Source struct {
	Config *rest.Config // the API server and credentials
	// ProxyName: with "", Services carrying the service-proxy-name label
	// belong to another proxy and are ignored (kube-proxy's behaviour);
	// otherwise only Services labelled with this name are handled.
	ProxyName string
	// Report gets each object's invalid fields (the agent does not trust
	// that the API server validated what it relies on).
	Report *report.Reporter
	// PageSize is the objects per list request (0: DefaultPageSize). Each
	// page is decoded and handed on while the next one is fetched.
	PageSize int64
	// WatchList lists each resource as a watch that begins with every
	// object (the API server's WatchList streaming): see stream.watchList.
	WatchList bool
	// NodeName is this node's name (with PodSource nodepods: the pods
	// watched, and the NodePods written).
	NodeName string
	// PodSource is where the policy cube's pods come from: PodsFromAPI
	// ("" too) or PodsFromNodePods.
	PodSource string

	reach  reach
	phases listPhases // of the initial lists of Services and EndpointSlices
	// claims (PodsFromNodePods): the pods of this node and the others,
	// told of every Node by the node stream.
	claims      *podClaims
	nodesSynced func() bool
}

var _ source.Source = (*Source)(nil)

// streamOptions are what the source's streams share: its reachability,
// page size and whether lists are watch-lists.
func (s *Source) streamOptions() streamOptions {
	return streamOptions{reach: &s.reach, pageSize: s.PageSize, watchList: s.WatchList}
}

// Unreachable is how long every request to the API server has been
// failing (0: it answers). The datapath keeps its last state meanwhile;
// readiness reports it after a grace.
func (s *Source) Unreachable() time.Duration { return s.reach.unreachableFor() }

// Selector is the label selector for Services and EndpointSlices.
func (s *Source) Selector() (labels.Selector, error) {
	op, vals := selection.DoesNotExist, []string(nil)
	if s.ProxyName != "" {
		op, vals = selection.Equals, []string{s.ProxyName}
	}
	proxy, err := labels.NewRequirement(LabelServiceProxyName, op, vals)
	if err != nil {
		return nil, err
	}
	headless, err := labels.NewRequirement(LabelHeadless, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*proxy, *headless), nil
}

// Run delivers the cluster's state and every change until ctx ends.
func (s *Source) Run(ctx context.Context, h source.Handler) error {
	sel, err := s.Selector()
	if err != nil {
		return err
	}
	c, err := newClient(s.Config)
	if err != nil {
		return err
	}
	selected := func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }
	services := &stream[*model.Service]{
		streamOptions: s.streamOptions(),
		name:          "services",
		api:           resource{c: c, rest: c.core, name: "services", list: func() runtime.Object { return &corev1.ServiceList{} }, item: func() protoObject { return &corev1.Service{} }, tweak: selected, phases: &s.phases},
		convert: func(o runtime.Object) *model.Service {
			api := o.(*corev1.Service)
			svc, err := k8s.ToService(api)
			s.Report.SetErr(report.Object{Kind: "Service", Namespace: api.Namespace, Name: api.Name}, report.InvalidField, err)
			return svc
		},
		deliver: h.OnService,
		forget:  s.forget("Service"),
		known:   h.ServiceKeys,
		phases:  &s.phases,
	}
	slices := &stream[*model.EndpointSlice]{
		streamOptions: s.streamOptions(),
		name:          "endpointslices",
		api:           resource{c: c, rest: c.discovery, name: "endpointslices", list: func() runtime.Object { return &discoveryv1.EndpointSliceList{} }, item: func() protoObject { return &discoveryv1.EndpointSlice{} }, tweak: selected, phases: &s.phases},
		convert: func(o runtime.Object) *model.EndpointSlice {
			api := o.(*discoveryv1.EndpointSlice)
			slice, err := k8s.ToEndpointSlice(api)
			s.Report.SetErr(report.Object{Kind: "EndpointSlice", Namespace: api.Namespace, Name: api.Name}, report.InvalidField, err)
			return slice
		},
		deliver: h.OnEndpointSlice,
		forget:  s.forget("EndpointSlice"),
		known:   h.EndpointSliceKeys,
		phases:  &s.phases,
	}
	// Synced means "every object listed has been handed to h". Declaring
	// the initial state complete any earlier would let the agent delete, as
	// stale, Services not delivered yet.
	synced := []func() bool{services.synced.Load, slices.synced.Load}
	go services.run(ctx)
	go slices.run(ctx)
	if ph, ok := h.(source.PolicyHandler); ok && s.PodSource == PodsFromNodePods {
		s.claims = s.newPodClaims(ph)
	}
	nodes := s.nodeStream(c, h)
	synced = append(synced, nodes.synced.Load)
	s.nodesSynced = nodes.synced.Load
	go nodes.run(ctx)
	if ph, ok := h.(source.PolicyHandler); ok {
		// Apart from the Services' barrier: the load balancer never
		// waits for the cluster's pods.
		go s.runPolicySources(ctx, c, ph)
	}
	if sh, ok := h.(source.SliceHandler); ok {
		go s.runSlices(ctx, c, sh)
	}
	if bh, ok := h.(source.BGPHandler); ok {
		go s.runBGP(ctx, c, bh)
	}

	slog.Info("listing Services and EndpointSlices", "selector", sel.String())
	for !allTrue(synced) {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Millisecond):
		}
	}
	h.OnSynced()
	<-ctx.Done()
	return nil
}

// forget clears the problems of a deleted object of kind.
func (s *Source) forget(kind string) func(types.NamespacedName) {
	return func(k types.NamespacedName) {
		s.Report.Clear(report.Object{Kind: kind, Namespace: k.Namespace, Name: k.Name}, report.InvalidField)
	}
}

// nodeStream watches every Node: this node's zone and pod CIDRs, and the
// other nodes' pod CIDRs and addresses (routes to their pods).
func (s *Source) nodeStream(c *client, h source.Handler) *stream[*model.NodeInfo] {
	var mu sync.Mutex
	have := map[types.NamespacedName]bool{}
	return &stream[*model.NodeInfo]{
		streamOptions: s.streamOptions(),
		name:          "nodes",
		api:           resource{c: c, rest: c.core, name: "nodes", list: func() runtime.Object { return &corev1.NodeList{} }, item: func() protoObject { return &corev1.Node{} }},
		convert: func(o runtime.Object) *model.NodeInfo {
			api := o.(*corev1.Node)
			n, err := k8s.ToNode(api)
			s.Report.SetErr(report.Object{Kind: "Node", Name: api.Name}, report.InvalidField, err)
			return n
		},
		deliver: func(k types.NamespacedName, n *model.NodeInfo) {
			mu.Lock()
			if n != nil {
				have[k] = true
			} else {
				delete(have, k)
			}
			mu.Unlock()
			if s.claims != nil {
				s.claims.setNodeInfo(k.Name, n)
			}
			h.OnNode(k.Name, n)
		},
		forget: s.forget("Node"),
		known: func() []types.NamespacedName {
			mu.Lock()
			defer mu.Unlock()
			return slices.Collect(maps.Keys(have))
		},
	}
}

func allTrue(fs []func() bool) bool {
	for _, f := range fs {
		if !f() {
			return false
		}
	}
	return true
}

// runSlices delivers every NetworkSlice to h, then tells it they are
// synced (at once when the CRD is not installed).
func (s *Source) runSlices(ctx context.Context, c *client, h source.SliceHandler) {
	st := s.sliceStream(c, h)
	go st.run(ctx)
	if waitSynced(ctx, st.synced.Load) {
		h.OnSlicesSynced()
	}
}

// waitSynced waits until synced says so (true), or ctx ends (false).
func waitSynced(ctx context.Context, synced func() bool) bool {
	for !synced() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

// podStream lists and watches Pod objects (tweak: a field selector, or
// nil for every pod).
func (s *Source) podStream(c *client, tweak func(*metav1.ListOptions), deliver func(types.NamespacedName, *model.Pod), known func() []types.NamespacedName) *stream[*model.Pod] {
	return &stream[*model.Pod]{
		streamOptions: s.streamOptions(),
		name:          "pods",
		api: resource{c: c, rest: c.core, name: "pods", tweak: tweak,
			list: func() runtime.Object { return &corev1.PodList{} }, item: func() protoObject { return &corev1.Pod{} }},
		convert: func(o runtime.Object) *model.Pod {
			api := o.(*corev1.Pod)
			p, err := k8s.ToPod(api)
			s.Report.SetErr(report.Object{Kind: "Pod", Namespace: api.Namespace, Name: api.Name}, report.InvalidField, err)
			return p
		},
		deliver: deliver,
		forget:  s.forget("Pod"),
		known:   known,
	}
}

// runPodStream delivers every pod of the cluster to h (PodsFromAPI).
func (s *Source) runPodStream(ctx context.Context, c *client, h source.PolicyHandler) []func() bool {
	pods := s.podStream(c, nil, h.OnPod, h.PodKeys)
	go pods.run(ctx)
	return []func() bool{pods.synced.Load}
}

// runPolicySources delivers every pod (PodSource), namespace and
// NetworkPolicy to h, then tells it they are synced.
func (s *Source) runPolicySources(ctx context.Context, c *client, h source.PolicyHandler) {
	var podsSynced []func() bool
	if s.claims != nil {
		podsSynced = s.runNodePodSources(ctx, c)
	} else {
		podsSynced = s.runPodStream(ctx, c, h)
	}
	namespaces := &stream[*model.Namespace]{
		streamOptions: s.streamOptions(),
		name:          "namespaces",
		api:           resource{c: c, rest: c.core, name: "namespaces", list: func() runtime.Object { return &corev1.NamespaceList{} }, item: func() protoObject { return &corev1.Namespace{} }},
		convert: func(o runtime.Object) *model.Namespace {
			return k8s.ToNamespace(o.(*corev1.Namespace))
		},
		deliver: func(k types.NamespacedName, ns *model.Namespace) { h.OnNamespace(k.Name, ns) },
		known:   h.NamespaceKeys,
	}
	policies := &stream[*model.Policy]{
		streamOptions: s.streamOptions(),
		name:          "networkpolicies",
		api: resource{c: c, rest: c.networking, name: "networkpolicies",
			list: func() runtime.Object { return &networkingv1.NetworkPolicyList{} }, item: func() protoObject { return &networkingv1.NetworkPolicy{} }},
		convert: func(o runtime.Object) *model.Policy {
			api := o.(*networkingv1.NetworkPolicy)
			p, err := k8s.ToPolicy(api)
			s.Report.SetErr(report.Object{Kind: "NetworkPolicy", Namespace: api.Namespace, Name: api.Name}, report.InvalidField, err)
			return p
		},
		deliver: h.OnPolicy,
		forget:  s.forget("NetworkPolicy"),
		known:   h.PolicyKeys,
	}
	go namespaces.run(ctx)
	go policies.run(ctx)
	synced := append(podsSynced, namespaces.synced.Load, policies.synced.Load)
	if ch, ok := h.(source.ClusterPolicyHandler); ok {
		// Before the policies are synced: a pod an Admin tier denies
		// must not be enforced without it first.
		cnps := s.clusterPolicyStream(c, ch)
		go cnps.run(ctx)
		synced = append(synced, cnps.synced.Load)
	}
	for !allTrue(synced) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
	h.OnPoliciesSynced()
}
