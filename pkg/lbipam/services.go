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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/netcube/netcube/pkg/source/kube"
)

// serviceCache keeps the cluster's Services the assigner is concerned
// with (concerned: LoadBalancers, and those still holding addresses or
// the cleanup finalizer). The others, nearly every Service of a large
// cluster, are dropped as they arrive, undecoded (kube.Lister, with
// mayConcern): an informer of every Service, as unstructured JSON, held
// 222 MB of the leading agent's heap at 100,000 Services (the bench
// compare report's peak RSS, 242 MB at 11-23, had become 580 MB).
type serviceCache struct {
	api  *kube.Lister
	kick func() // a concerned Service was added, changed or dropped

	mu     sync.Mutex
	byKey  map[types.NamespacedName]*corev1.Service
	synced chan struct{} // closed after the first complete list
	once   sync.Once
}

// newServiceCache reads Services through a client of its own, pageSize a
// list page (0: the default).
func newServiceCache(cfg *rest.Config, pageSize int64, kick func()) (*serviceCache, error) {
	api, err := kube.NewServiceLister(cfg, pageSize, mayConcern)
	if err != nil {
		return nil, fmt.Errorf("LoadBalancer IPs: Services client: %w", err)
	}
	return &serviceCache{api: api, kick: kick, byKey: map[types.NamespacedName]*corev1.Service{}, synced: make(chan struct{})}, nil
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

// list reads every Service, keeps the concerned ones and returns the
// list's resource version.
func (s *serviceCache) list(ctx context.Context) (string, error) {
	next := map[types.NamespacedName]*corev1.Service{}
	rv, err := s.api.Each(ctx, func(o runtime.Object) error {
		if svc, ok := o.(*corev1.Service); ok && concerned(svc) {
			next[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = compact(svc)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.byKey = next
	s.mu.Unlock()
	s.once.Do(func() { close(s.synced) })
	s.kick()
	return rv, nil
}

// watch applies the changes after version rv until the watch ends, and
// returns the last version seen.
func (s *serviceCache) watch(ctx context.Context, rv string) (string, error) {
	w, err := s.api.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
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
