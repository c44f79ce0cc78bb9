package lbipam

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// informerFor is what dynamicinformer's factory builds for gvr (every
// namespace, no resync, the namespace index), without the factory:
// dynamicinformer imports client-go's informers, hence the whole clientset,
// whose init registers every API group of Kubernetes in its scheme. That
// cost the agent's every process ~10 MB of heap and, with the code and
// type data it touches, ~26 MB of RSS at 1,000 Services, for types the
// agent never reads.
func informerFor(client dynamic.Interface, gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	r := client.Resource(gvr)
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) { return r.List(context.Background(), o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			return r.Watch(context.Background(), o)
		},
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return r.Watch(ctx, o) },
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{
			Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			ObjectDescription: gvr.String(),
		})
}
