// Package kube is a Source watching a Kubernetes API server with client-go
// shared informers for Services, EndpointSlices and this node's Node, the
// way kube-proxy does: the same label selectors (Services of another proxy,
// and headless Services, are never even listed), objects stripped of what
// netcube does not read before they are cached, and WaitForCacheSync before
// the initial state is declared complete. Retries with backoff happen in the
// reconciler's workqueue; client-go's reflectors retry the API itself.
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
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

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
	factory := informers.NewSharedInformerFactoryWithOptions(s.Client, s.Resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.String() }),
		informers.WithTransform(strip))
	services := factory.Core().V1().Services().Informer()
	slices := factory.Discovery().V1().EndpointSlices().Informer()

	if _, err := services.AddEventHandler(handlerFor(func(k types.NamespacedName, o *corev1.Service) { h.OnService(k, o) })); err != nil {
		return err
	}
	if _, err := slices.AddEventHandler(handlerFor(func(k types.NamespacedName, o *discoveryv1.EndpointSlice) { h.OnEndpointSlice(k, o) })); err != nil {
		return err
	}
	synced := []cache.InformerSynced{services.HasSynced, slices.HasSynced}

	if s.NodeName != "" {
		nodeFactory := informers.NewSharedInformerFactoryWithOptions(s.Client, s.Resync,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.NodeName).String()
			}),
			informers.WithTransform(strip))
		nodes := nodeFactory.Core().V1().Nodes().Informer()
		if _, err := nodes.AddEventHandler(handlerFor(func(k types.NamespacedName, o *corev1.Node) { h.OnNode(k.Name, o) })); err != nil {
			return err
		}
		synced = append(synced, nodes.HasSynced)
		nodeFactory.Start(ctx.Done())
		defer nodeFactory.Shutdown()
	}

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	slog.Info("waiting for informer caches", "selector", sel.String())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("informer caches did not sync")
	}
	h.OnSynced()
	<-ctx.Done()
	return nil
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

// strip drops what netcube never reads before an object is cached: managed
// fields and the last-applied annotation are most of a typical object's
// size, and at 100,000 Services the cache is most of the agent's memory.
func strip(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, corev1.LastAppliedConfigAnnotation)
		}
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return obj, nil
}
