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
	// A watch-list (sendInitialEvents) is refused as an API server
	// without WatchList refuses it (refuseWatchList), or begins with
	// every item then the bookmark ending them (cutInitial: the next
	// one has no bookmark, and the test stops it); watchLists counts
	// them.
	refuseWatchList bool
	cutInitial      bool
	watchLists      int
	// continued, if set, is told each continue token asked for.
	continued chan string
	limits    []int64 // each list request's limit (page size)
}

func (f *fakeAPI) List(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		err := f.listErr
		f.listErr = nil
		return nil, err
	}
	f.limits = append(f.limits, o.Limit)
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
		if f.continued != nil {
			f.continued <- o.Continue
		}
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
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		return f.watchList(o)
	}
	if o.ResourceVersion == "" {
		return nil, fmt.Errorf("watch without a resource version")
	}
	w := watch.NewRaceFreeFake()
	f.watchers <- w
	return w, nil
}

func (f *fakeAPI) watchList(o metav1.ListOptions) (watch.Interface, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuseWatchList {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "", nil)
	}
	if o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan || o.ResourceVersion != "" || !o.AllowWatchBookmarks {
		return nil, fmt.Errorf("watch-list with options %+v, want resourceVersionMatch NotOlderThan from no version, with bookmarks", o)
	}
	f.watchLists++
	w := watch.NewRaceFreeFake()
	for _, it := range f.items {
		w.Add(it)
	}
	if f.cutInitial { // the test ends it
		f.cutInitial = false
		f.watchers <- w
		return w, nil
	}
	w.Action(watch.Bookmark, &corev1.Service{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "100",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
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
	h.held[k] = s.ClusterIPs()[0].String()
	h.log = append(h.log, k.String()+" "+s.ClusterIPs()[0].String())
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

// nextWatcher is the next watch the stream started.
func (f *fakeAPI) nextWatcher(t *testing.T) *watch.RaceFreeFakeWatcher {
	t.Helper()
	select {
	case w := <-f.watchers:
		return w
	case <-time.After(5 * time.Second):
		t.Fatal("no watch started")
		return nil
	}
}

// expect waits until the deliveries since the last take are want (in
// any order).
func (h *holder) expect(t *testing.T, step string, want ...string) {
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

// serviceStream streams api's Services to h, retrying at once.
func serviceStream(api *fakeAPI, h *holder, o streamOptions) *stream[*model.Service] {
	return &stream[*model.Service]{
		name: "services", api: api,
		convert:       func(o runtime.Object) *model.Service { svc, _ := k8s.ToService(o.(*corev1.Service)); return svc },
		deliver:       h.deliver,
		known:         h.keys,
		streamOptions: o,
		backoff:       wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1000},
	}
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
	s := serviceStream(api, h, streamOptions{pageSize: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.run(ctx)

	nextWatcher := func() *watch.RaceFreeFakeWatcher { t.Helper(); return api.nextWatcher(t) }
	expect := func(step string, want ...string) { t.Helper(); h.expect(t, step, want...) }

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

// TestStreamWatchList: with watchList, the state comes as one watch that
// begins with every object, complete at its bookmark, and the same watch
// carries the changes: no list request. A watch-list cut before its
// bookmark is not complete and is asked again; a relist delivers as
// deleted what it lacks; an API server that refuses watch-lists is listed
// in pages.
func TestStreamWatchList(t *testing.T) {
	api := &fakeAPI{
		items:      []*corev1.Service{apiService("a", "10.96.0.1"), apiService("b", "10.96.0.2")},
		watchers:   make(chan *watch.RaceFreeFakeWatcher, 1),
		cutInitial: true,
	}
	h := &holder{held: map[types.NamespacedName]string{}}
	s := serviceStream(api, h, streamOptions{pageSize: 1, watchList: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.run(ctx)
	nextWatcher := func() *watch.RaceFreeFakeWatcher { t.Helper(); return api.nextWatcher(t) }
	expect := func(step string, want ...string) { t.Helper(); h.expect(t, step, want...) }

	// The first watch-list is cut before its bookmark: not synced, asked
	// again; the second completes.
	w := nextWatcher()
	expect("the initial events before the bookmark", "ns/a 10.96.0.1", "ns/b 10.96.0.2")
	if s.synced.Load() {
		t.Fatal("synced before the initial events' bookmark")
	}
	w.Stop()
	w = nextWatcher()
	expect("the initial events, asked again after the cut", "ns/a 10.96.0.1", "ns/b 10.96.0.2")
	waitSynced := func() {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !s.synced.Load(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("not synced after the initial events' bookmark")
			}
		}
	}
	waitSynced()
	api.mu.Lock()
	if api.lists != 0 || api.watchLists != 2 {
		t.Errorf("%d list requests and %d watch-lists, want none and 2 (one cut)", api.lists, api.watchLists)
	}
	api.mu.Unlock()

	// The same watch carries the changes.
	w.Add(apiService("c", "10.96.0.3"))
	w.Delete(apiService("a", "10.96.0.1"))
	expect("watch events on the watch-list", "delete ns/a", "ns/c 10.96.0.3")

	// It expires while b is deleted and d created: the next watch-list
	// delivers what exists and deletes what no longer does.
	api.mu.Lock()
	api.items = []*corev1.Service{apiService("c", "10.96.0.3"), apiService("d", "10.96.0.4")}
	api.mu.Unlock()
	w.Error(&apierrors.NewResourceExpired("too old").ErrStatus)
	nextWatcher()
	expect("relist by watch-list", "delete ns/b", "ns/c 10.96.0.3", "ns/d 10.96.0.4")

	// An API server without WatchList: listed in pages, then watched.
	old := &fakeAPI{items: api.items, watchers: make(chan *watch.RaceFreeFakeWatcher, 1), refuseWatchList: true}
	h2 := &holder{held: map[types.NamespacedName]string{}}
	s2 := serviceStream(old, h2, streamOptions{pageSize: 1, watchList: true})
	go s2.run(ctx)
	select {
	case <-old.watchers:
	case <-time.After(5 * time.Second):
		t.Fatal("refused watch-list: no watch after the list")
	}
	if got := h2.take(); !slices.Equal(got, []string{"ns/c 10.96.0.3", "ns/d 10.96.0.4"}) || !s2.synced.Load() {
		t.Errorf("refused watch-list: delivered %q (synced %v), want c and d listed", got, s2.synced.Load())
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	if old.lists != 1 || old.watchLists != 0 {
		t.Errorf("refused watch-list: %d lists and %d watch-lists, want 1 and 0", old.lists, old.watchLists)
	}
}

// The API server is asked for the next page while the current one is
// handed on, not after: the first page's first Service is held until
// the second page has been asked for.
func TestListAsksForTheNextPageWhileHandingOn(t *testing.T) {
	api := &fakeAPI{
		items:     []*corev1.Service{apiService("a", "10.96.0.1"), apiService("b", "10.96.0.2"), apiService("c", "10.96.0.3")},
		watchers:  make(chan *watch.RaceFreeFakeWatcher, 1),
		continued: make(chan string, 10),
	}
	h := &holder{held: map[types.NamespacedName]string{}}
	s := serviceStream(api, h, streamOptions{pageSize: 2})
	asked := ""
	s.deliver = func(k types.NamespacedName, svc *model.Service) {
		if k.Name == "a" {
			select {
			case asked = <-api.continued:
			case <-time.After(2 * time.Second):
			}
		}
		h.deliver(k, svc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.run(ctx)
	api.nextWatcher(t)
	h.expect(t, "the list", "ns/a 10.96.0.1", "ns/b 10.96.0.2", "ns/c 10.96.0.3")
	if asked != "2" {
		t.Errorf("while the first page was handed on, the page after item 2 was not asked for (continue %q)", asked)
	}
}

// TestPageSize: every list request asks for the configured page size, and
// for DefaultPageSize when none is configured (never an unpaged list,
// which would hold the whole list in one response).
func TestPageSize(t *testing.T) {
	for _, c := range []struct {
		configured, want int64
	}{{0, DefaultPageSize}, {2, 2}} {
		api := &fakeAPI{
			items:    []*corev1.Service{apiService("a", "10.96.0.1"), apiService("b", "10.96.0.2"), apiService("c", "10.96.0.3")},
			watchers: make(chan *watch.RaceFreeFakeWatcher, 1),
		}
		h := &holder{held: map[types.NamespacedName]string{}}
		s := serviceStream(api, h, streamOptions{pageSize: c.configured})
		ctx, cancel := context.WithCancel(context.Background())
		go s.run(ctx)
		api.nextWatcher(t) // listed
		h.expect(t, fmt.Sprintf("page size %d", c.configured), "ns/a 10.96.0.1", "ns/b 10.96.0.2", "ns/c 10.96.0.3")
		cancel()
		api.mu.Lock()
		limits := slices.Clone(api.limits)
		api.mu.Unlock()
		wantPages := int((3 + c.want - 1) / c.want)
		if len(limits) != wantPages || slices.ContainsFunc(limits, func(l int64) bool { return l != c.want }) {
			t.Errorf("page size %d configured: list requests with limits %v, want %d of %d", c.configured, limits, wantPages, c.want)
		}
	}
}
