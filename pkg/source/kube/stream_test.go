package kube

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
)

func apiService(name, ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}},
	}
}

// fakeAPI serves a list (paged) and hands out watchers the test drives. It
// stands in for the API server only where the real one cannot be made to
// misbehave on cue (an expired watch, a failing request); the stream runs
// against the real API server in test/controlplane.
type fakeAPI struct {
	mu       sync.Mutex
	items    []*corev1.Service
	listErr  error
	watchErr error
	lists    int
	watchers chan *watch.RaceFreeFakeWatcher
}

func (f *fakeAPI) List(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		err := f.listErr
		f.listErr = nil
		return nil, err
	}
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	} else {
		f.lists++
	}
	end := min(start+int(o.Limit), len(f.items))
	page := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}}
	for _, s := range f.items[start:end] {
		page.Items = append(page.Items, *s)
	}
	if end < len(f.items) {
		page.Continue = strconv.Itoa(end)
	}
	return page, nil
}

func (f *fakeAPI) Watch(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	err := f.watchErr
	f.watchErr = nil
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if o.ResourceVersion == "" {
		return nil, fmt.Errorf("watch without a resource version")
	}
	w := watch.NewRaceFreeFake()
	f.watchers <- w
	return w, nil
}

// holder is a handler: it keeps what it was delivered and logs each delivery.
type holder struct {
	mu   sync.Mutex
	held map[types.NamespacedName]string
	log  []string
}

func (h *holder) deliver(k types.NamespacedName, s *model.Service) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s == nil {
		delete(h.held, k)
		h.log = append(h.log, "delete "+k.String())
		return
	}
	h.held[k] = s.ClusterIPs[0].String()
	h.log = append(h.log, k.String()+" "+s.ClusterIPs[0].String())
}

func (h *holder) keys() []types.NamespacedName {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ks []types.NamespacedName
	for k := range h.held {
		ks = append(ks, k)
	}
	return ks
}

func (h *holder) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.log
	h.log = nil
	slices.Sort(out)
	return out
}

// TestStream: a paged list delivers everything before the stream reports
// synced; watch events follow; an expired watch makes it list again and
// deliver as deleted what the new list lacks; failed requests are retried.
func TestStream(t *testing.T) {
	api := &fakeAPI{
		items:    []*corev1.Service{apiService("a", "10.96.0.1"), apiService("b", "10.96.0.2"), apiService("c", "10.96.0.3")},
		listErr:  apierrors.NewServiceUnavailable("starting"),
		watchers: make(chan *watch.RaceFreeFakeWatcher, 1),
	}
	h := &holder{held: map[types.NamespacedName]string{}}
	s := &stream[*model.Service]{
		name: "services", api: api,
		convert:  func(o runtime.Object) *model.Service { svc, _ := k8s.ToService(o.(*corev1.Service)); return svc },
		deliver:  h.deliver,
		known:    h.keys,
		pageSize: 2,
		backoff:  wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1000},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.run(ctx)

	nextWatcher := func() *watch.RaceFreeFakeWatcher {
		t.Helper()
		select {
		case w := <-api.watchers:
			return w
		case <-time.After(5 * time.Second):
			t.Fatal("no watch started")
			return nil
		}
	}
	expect := func(step string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		var got []string
		for time.Now().Before(deadline) {
			got = append(got, h.take()...)
			slices.Sort(got)
			if slices.Equal(got, want) {
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("%s: delivered %q, want %q", step, got, want)
	}

	w := nextWatcher() // the list failed once, was retried, and completed
	if !s.synced.Load() {
		t.Fatal("watching, but not synced")
	}
	expect("first list (two pages, after a failed request)", "ns/a 10.96.0.1", "ns/b 10.96.0.2", "ns/c 10.96.0.3")

	w.Add(apiService("d", "10.96.0.4"))
	w.Modify(apiService("a", "10.96.0.9"))
	w.Delete(apiService("b", "10.96.0.2"))
	expect("watch events", "delete ns/b", "ns/a 10.96.0.9", "ns/d 10.96.0.4")

	// The watch expires while d is deleted and e created: the relist
	// delivers what exists and deletes what no longer does.
	api.mu.Lock()
	api.items = []*corev1.Service{apiService("a", "10.96.0.9"), apiService("c", "10.96.0.3"), apiService("e", "10.96.0.5")}
	api.mu.Unlock()
	w.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
	w = nextWatcher()
	expect("relist after an expired watch", "delete ns/d", "ns/a 10.96.0.9", "ns/c 10.96.0.3", "ns/e 10.96.0.5")

	// A watch that cannot start is retried from where it was.
	api.mu.Lock()
	api.watchErr = apierrors.NewInternalError(fmt.Errorf("etcd down"))
	lists := api.lists
	api.mu.Unlock()
	w.Stop()
	w = nextWatcher()
	w.Add(apiService("f", "10.96.0.6"))
	expect("watch retried", "ns/f 10.96.0.6")
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.lists != lists {
		t.Errorf("a failed watch start relisted (%d lists, want %d)", api.lists, lists)
	}
}
