package kube

import (
	"fmt"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// deliveringStore is the store a client-go Reflector fills, except that it
// keeps no API objects: each is converted to netcube's model as it arrives
// and handed on. An informer would keep every object in its cache as well,
// and at 100,000 Services that cache was most of the agent's memory; the
// reconciler already keeps the converted model, which is all netcube reads.
// T is the model's pointer type (*model.Service, *model.EndpointSlice); a
// nil T delivered means deleted.
type deliveringStore[T comparable] struct {
	convert func(runtime.Object) T
	deliver func(types.NamespacedName, T)

	mu     sync.Mutex
	keys   map[types.NamespacedName]struct{} // what was delivered and not deleted
	synced atomic.Bool                       // the first list has been delivered
}

func newDeliveringStore[T comparable](convert func(runtime.Object) T, deliver func(types.NamespacedName, T)) *deliveringStore[T] {
	return &deliveringStore[T]{convert: convert, deliver: deliver, keys: map[types.NamespacedName]struct{}{}}
}

var _ cache.TransformingStore = (*deliveringStore[*int])(nil)

// converted is an object already converted, with the metadata the
// reflector's own bookkeeping reads. It is what the reflector keeps while it
// streams the initial list (the Transformer below), so that list never holds
// 100,000 full API objects either.
type converted[T any] struct {
	key types.NamespacedName
	rv  string
	obj T
}

func (c *converted[T]) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (c *converted[T]) DeepCopyObject() runtime.Object   { cp := *c; return &cp }
func (c *converted[T]) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: c.key.Namespace, Name: c.key.Name, ResourceVersion: c.rv}
}

func (s *deliveringStore[T]) toConverted(obj any) (*converted[T], error) {
	switch o := obj.(type) {
	case *converted[T]:
		return o, nil
	case cache.DeletedFinalStateUnknown:
		return s.toConverted(o.Obj)
	case runtime.Object:
		m, ok := o.(metav1.Object)
		if !ok {
			return nil, fmt.Errorf("%T has no metadata", obj)
		}
		return &converted[T]{
			key: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()},
			rv:  m.GetResourceVersion(),
			obj: s.convert(o),
		}, nil
	}
	return nil, fmt.Errorf("unexpected %T", obj)
}

// Transformer converts objects in the reflector's temporary store too.
func (s *deliveringStore[T]) Transformer() cache.TransformFunc {
	return func(obj any) (any, error) { return s.toConverted(obj) }
}

func (s *deliveringStore[T]) Add(obj any) error    { return s.put(obj) }
func (s *deliveringStore[T]) Update(obj any) error { return s.put(obj) }

func (s *deliveringStore[T]) put(obj any) error {
	c, err := s.toConverted(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.keys[c.key] = struct{}{}
	s.mu.Unlock()
	s.deliver(c.key, c.obj)
	return nil
}

func (s *deliveringStore[T]) Delete(obj any) error {
	c, err := s.toConverted(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.keys, c.key)
	s.mu.Unlock()
	var gone T
	s.deliver(c.key, gone)
	return nil
}

// Replace is a full list (the first, or a relist after the watch could not
// resume): everything in it is delivered, and whatever was delivered before
// but is not in it has been deleted meanwhile.
func (s *deliveringStore[T]) Replace(list []any, _ string) error {
	next := make(map[types.NamespacedName]struct{}, len(list))
	var cs []*converted[T]
	for _, obj := range list {
		c, err := s.toConverted(obj)
		if err != nil {
			return err
		}
		next[c.key] = struct{}{}
		cs = append(cs, c)
	}
	s.mu.Lock()
	prev := s.keys
	s.keys = next
	s.mu.Unlock()
	var gone T
	for k := range prev {
		if _, ok := next[k]; !ok {
			s.deliver(k, gone)
		}
	}
	for _, c := range cs {
		s.deliver(c.key, c.obj)
	}
	s.synced.Store(true)
	return nil
}

func (s *deliveringStore[T]) Resync() error { return nil }

// HasSynced: the first list has been delivered.
func (s *deliveringStore[T]) HasSynced() bool { return s.synced.Load() }
