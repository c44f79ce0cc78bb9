package lbipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// serviceCache keeps the cluster's Services the assigner is concerned
// with (concerned: LoadBalancers, and those still holding addresses or
// the cleanup finalizer), read in protobuf a page at a time. The others,
// nearly every Service of a large cluster, are dropped as they are
// decoded: an informer of every Service, as unstructured JSON, held
// 222 MB of the leading agent's heap at 100,000 Services (the bench
// compare report's peak RSS, 242 MB at 11-23, had become 580 MB).
type serviceCache struct {
	rest *rest.RESTClient
	kick func() // a concerned Service was added, changed or dropped

	mu     sync.Mutex
	byKey  map[types.NamespacedName]*corev1.Service
	synced chan struct{} // closed after the first complete list
	once   sync.Once
}

// servicePage is how many Services a list asks for at once. The API
// server walks every Service from a page's first to the end of the list
// to serve it (kube.DefaultPageSize says why), so 500 a page cost it four
// times the work of 2,000 at 100,000 Services. A page is decoded whole
// here, unlike the source's, which reads its pages of 10,000 item by
// item: five times fewer Services held at once.
const servicePage = 2000

// newServiceCache reads Services through a client of its own: core/v1
// only, protobuf (a third of JSON's size, and decoded without maps).
func newServiceCache(cfg *rest.Config, kick func()) (*serviceCache, error) {
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath = &corev1.SchemeGroupVersion, "/api"
	c.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("LoadBalancer IPs: Services client: %w", err)
	}
	return &serviceCache{rest: rc, kick: kick, byKey: map[types.NamespacedName]*corev1.Service{}, synced: make(chan struct{})}, nil
}

// run lists, then watches from the list's version; a watch that ends is
// started again from the last version seen, and a version too old for the
// API server (410 Gone) lists again. Until ctx ends.
func (s *serviceCache) run(ctx context.Context) {
	backoff := time.Duration(0)
	rv := ""
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			rv, err = s.list(ctx)
		}
		if err == nil {
			rv, err = s.watch(ctx, rv)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errGone) {
			rv, err = "", nil // list again, at once
		}
		if err != nil {
			backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
			slog.Warn("LoadBalancer IPs: reading Services, retrying", "err", err, "in", backoff)
			rv = ""
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
	}
}

var errGone = errors.New("resource version too old")

// list reads every Service, page by page, keeps the concerned ones and
// returns the list's resource version.
func (s *serviceCache) list(ctx context.Context) (string, error) {
	next := map[types.NamespacedName]*corev1.Service{}
	opts := metav1.ListOptions{Limit: servicePage}
	for {
		var page corev1.ServiceList
		if err := s.rest.Get().Resource("services").VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(&page); err != nil {
			return "", fmt.Errorf("list Services: %w", err)
		}
		for i := range page.Items {
			if svc := &page.Items[i]; concerned(svc) {
				next[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = compact(svc)
			}
		}
		if page.Continue == "" {
			s.mu.Lock()
			s.byKey = next
			s.mu.Unlock()
			s.once.Do(func() { close(s.synced) })
			s.kick()
			return page.ResourceVersion, nil
		}
		opts.Continue = page.Continue
	}
}

// watch applies the changes after version rv until the watch ends, and
// returns the last version seen.
func (s *serviceCache) watch(ctx context.Context, rv string) (string, error) {
	opts := metav1.ListOptions{Watch: true, ResourceVersion: rv, AllowWatchBookmarks: true}
	w, err := s.rest.Get().Resource("services").VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return rv, errGone
		}
		return rv, fmt.Errorf("watch Services: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, nil // the API server ends watches now and then
			}
			if ev.Type == watch.Error {
				if err := apierrors.FromObject(ev.Object); apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
					return rv, errGone
				} else {
					return rv, fmt.Errorf("watch Services: %w", err)
				}
			}
			svc, ok := ev.Object.(*corev1.Service)
			if !ok {
				continue
			}
			rv = svc.ResourceVersion
			if ev.Type != watch.Bookmark {
				s.apply(svc, ev.Type == watch.Deleted)
			}
		}
	}
}

// apply keeps svc if it is concerned and not deleted, and drops it
// otherwise; a change to what is kept kicks the assigner.
func (s *serviceCache) apply(svc *corev1.Service, deleted bool) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	s.mu.Lock()
	_, had := s.byKey[key]
	keep := !deleted && concerned(svc)
	if keep {
		s.byKey[key] = compact(svc)
	} else {
		delete(s.byKey, key)
	}
	s.mu.Unlock()
	if keep || had {
		s.kick()
	}
}

// services are the concerned Services now.
func (s *serviceCache) services() []*corev1.Service {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*corev1.Service, 0, len(s.byKey))
	for _, svc := range s.byKey {
		out = append(out, svc)
	}
	return out
}

// compact is svc without its managed fields, which the assigner never
// reads.
func compact(svc *corev1.Service) *corev1.Service {
	c := *svc
	c.ManagedFields = nil
	return &c
}
