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

	// Synced means "every object listed has been handed to h": that is the
	// registrations' HasSynced, not the informers' (which only says the
	// cache is filled). Declaring the initial state complete any earlier
	// would let the agent delete, as stale, Services not delivered yet.
	svcReg, err := services.AddEventHandler(handlerFor(func(k types.NamespacedName, o *corev1.Service) { h.OnService(k, o) }))
	if err != nil {
		return err
	}
	sliceReg, err := slices.AddEventHandler(handlerFor(func(k types.NamespacedName, o *discoveryv1.EndpointSlice) { h.OnEndpointSlice(k, o) }))
	if err != nil {
		return err
	}
	synced := []cache.InformerSynced{svcReg.HasSynced, sliceReg.HasSynced}

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

// strip keeps only what netcube reads before an object is cached: at
// 100,000 Services the informer caches are most of the agent's memory, and
// managed fields, annotations, status and topology details are most of an
// object. (Fields that later Service features read must be kept here.)
func strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return &corev1.Service{
			ObjectMeta: minimalMeta(o.ObjectMeta),
			Spec: corev1.ServiceSpec{
				Type: o.Spec.Type, ClusterIP: o.Spec.ClusterIP, ClusterIPs: o.Spec.ClusterIPs,
				Ports: o.Spec.Ports, IPFamilies: o.Spec.IPFamilies,
			},
		}, nil
	case *discoveryv1.EndpointSlice:
		out := &discoveryv1.EndpointSlice{
			ObjectMeta:  minimalMeta(o.ObjectMeta),
			AddressType: o.AddressType,
			Ports:       o.Ports,
			Endpoints:   make([]discoveryv1.Endpoint, len(o.Endpoints)),
		}
		if name, ok := o.Labels[discoveryv1.LabelServiceName]; ok {
			out.Labels = map[string]string{discoveryv1.LabelServiceName: name}
		}
		for i, ep := range o.Endpoints {
			out.Endpoints[i] = discoveryv1.Endpoint{Addresses: ep.Addresses, Conditions: ep.Conditions, NodeName: ep.NodeName}
		}
		return out, nil
	case *corev1.Node:
		o.ManagedFields = nil
		o.Status.Images = nil
		return o, nil
	}
	return obj, nil
}

// minimalMeta keeps what the informer and netcube need to tell objects and
// versions apart.
func minimalMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
}
