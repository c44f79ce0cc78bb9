package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Lister reads one resource for a reader of its own (the LoadBalancer IP
// assigner reads every Service) the way the Source reads: pages of
// DefaultPageSize objects (or the agent's --api-list-page-size), each
// read from the response as it arrives and decoded an item at a time. The
// assigner decoded whole pages of 2,000 before: at 100,000 Services a
// page was 20 MB of the leading agent's heap at its peak, while it
// started, and the API server, which walks the rest of the list for every
// page (DefaultPageSize), visited 2.5 million objects for that list, as
// many as for the Source's Services and EndpointSlices together
// (docs/benchmarks/memory-profile.md).
type Lister struct {
	r        resource
	pageSize int64
}

// NewServiceLister lists and watches Services through a client of its own,
// pageSize a page (0: DefaultPageSize). keep, if not nil, sees each
// Service's protobuf encoding before it is decoded: those it rejects are
// not decoded, nor handed on (a reader interested in few Services makes
// no garbage of the others). It is a filter of protobuf pages only: a
// page in JSON hands on every Service.
func NewServiceLister(cfg *rest.Config, pageSize int64, keep func(encoded []byte) bool) (*Lister, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return &Lister{pageSize: pageSize, r: resource{c: c, rest: c.core, name: "services",
		list: func() runtime.Object { return &corev1.ServiceList{} }, item: func() protoObject { return &corev1.Service{} }, keep: keep}}, nil
}

// Each hands fn every object, one at a time, each decoded into an object
// of its own (fn may keep it), and returns the list's resource version,
// to watch from. It stops at fn's first error. A continue token that
// expires part way is an error: the caller lists again from the start.
func (l *Lister) Each(ctx context.Context, fn func(runtime.Object) error) (string, error) {
	opts := metav1.ListOptions{Limit: l.pageSize}
	for {
		page, err := l.r.List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("list %s: %w", l.r.name, err)
		}
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return "", err
		}
		if p, ok := page.(*pagedList); ok {
			err = p.each(fn)
		} else {
			err = meta.EachListItem(page, fn)
		}
		if err != nil {
			return "", fmt.Errorf("list %s: %w", l.r.name, err)
		}
		if lm.GetContinue() == "" {
			return lm.GetResourceVersion(), nil
		}
		opts.Continue = lm.GetContinue()
	}
}

// Watch watches the resource from opts.ResourceVersion.
func (l *Lister) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return l.r.Watch(ctx, opts)
}
