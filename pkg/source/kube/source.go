// Package kube is a Source watching a Kubernetes API server: a paged list
// then a watch for Services and EndpointSlices (stream), with kube-proxy's
// label selectors (Services of another proxy, and headless Services, are
// never even listed), whose objects are converted to netcube's model on
// arrival and handed on, never cached; and an informer for this node's Node.
// The initial state is declared complete only once every listed object has
// been delivered. Failed API requests are retried with backoff here; failed
// map writes, in the reconciler's workqueue.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source"
)

// Labels kube-proxy selects on.
const (
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelHeadless         = corev1.IsHeadlessService // service.kubernetes.io/headless
)

// Source watches an API server.
type Source struct {
	Client kubernetes.Interface
	// ProxyName: with "", Services carrying the service-proxy-name label
	// belong to another proxy and are ignored (kube-proxy's behaviour);
	// otherwise only Services labelled with this name are handled.
	ProxyName string
	NodeName  string        // this node (for its Node object); "" = none
	Resync    time.Duration // informer resync period; 0 = none
}

var _ source.Source = (*Source)(nil)

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
	services := &stream[*model.Service]{
		name:    "services",
		list:    listSelected(sel, s.Client.CoreV1().Services("").List),
		watch:   watchSelected(sel, s.Client.CoreV1().Services("").Watch),
		convert: func(o runtime.Object) *model.Service { return k8s.ToService(o.(*corev1.Service)) },
		deliver: h.OnService,
		known:   h.ServiceKeys,
	}
	slices := &stream[*model.EndpointSlice]{
		name:  "endpointslices",
		list:  listSelected(sel, s.Client.DiscoveryV1().EndpointSlices("").List),
		watch: watchSelected(sel, s.Client.DiscoveryV1().EndpointSlices("").Watch),
		convert: func(o runtime.Object) *model.EndpointSlice {
			return k8s.ToEndpointSlice(o.(*discoveryv1.EndpointSlice))
		},
		deliver: h.OnEndpointSlice,
		known:   h.EndpointSliceKeys,
	}
	// Synced means "every object listed has been handed to h". Declaring
	// the initial state complete any earlier would let the agent delete, as
	// stale, Services not delivered yet.
	synced := []cache.InformerSynced{services.synced.Load, slices.synced.Load}
	for _, st := range []interface{ run(context.Context) }{services, slices} {
		go st.run(ctx)
	}

	if s.NodeName != "" {
		nodeFactory := informers.NewSharedInformerFactoryWithOptions(s.Client, s.Resync,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.NodeName).String()
			}),
			informers.WithTransform(strip))
		nodes := nodeFactory.Core().V1().Nodes().Informer()
		nodeReg, err := nodes.AddEventHandler(handlerFor(func(k types.NamespacedName, o *corev1.Node) { h.OnNode(k.Name, o) }))
		if err != nil {
			return err
		}
		synced = append(synced, nodeReg.HasSynced)
		nodeFactory.Start(ctx.Done())
		defer nodeFactory.Shutdown()
	}

	slog.Info("listing Services and EndpointSlices", "selector", sel.String())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("initial lists did not complete")
	}
	h.OnSynced()
	<-ctx.Done()
	return nil
}

// listSelected and watchSelected apply the label selector to one resource's
// list and watch.
func listSelected[L runtime.Object](sel labels.Selector,
	list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.LabelSelector = sel.String()
		return list(ctx, o)
	}
}

func watchSelected(sel labels.Selector,
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = sel.String()
		return watchFn(ctx, o)
	}
}

// handlerFor adapts typed callbacks to informer events, unwrapping the
// tombstones of deletions the informer only learned about from a relist.
func handlerFor[T metav1.Object](f func(types.NamespacedName, T)) cache.ResourceEventHandler {
	key := func(o metav1.Object) types.NamespacedName {
		return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
	}
	var zero T
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				f(key(o), o)
			}
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(T); ok {
				f(key(o), o)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if o, ok := obj.(T); ok {
				f(key(o), zero)
			}
		},
	}
}

// strip drops from a Node what netcube never reads before it is cached.
func strip(obj any) (any, error) {
	if o, ok := obj.(*corev1.Node); ok {
		o.ManagedFields = nil
		o.Status.Images = nil
	}
	return obj, nil
}
