package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source/kube"
)

// recorder is a source.Handler that keeps what it is handed.
type recorder struct {
	mu       sync.Mutex
	services map[types.NamespacedName]*model.Service
	slices   map[types.NamespacedName]*model.EndpointSlice
	// atSync: how many Services and slices were held when OnSynced came.
	atSync [2]int
	synced chan struct{}
}

func (r *recorder) OnService(k types.NamespacedName, s *model.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.services[k] = s
}

func (r *recorder) OnEndpointSlice(k types.NamespacedName, s *model.EndpointSlice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slices[k] = s
}

func (r *recorder) OnNode(string, *model.NodeInfo) {}

func (r *recorder) OnSynced() {
	r.mu.Lock()
	r.atSync = [2]int{len(r.services), len(r.slices)}
	r.mu.Unlock()
	close(r.synced)
}

func (r *recorder) ServiceKeys() []types.NamespacedName       { return nil }
func (r *recorder) EndpointSliceKeys() []types.NamespacedName { return nil }

// TestListPagesFromTheAPI: the source lists in pages and decodes a page's
// items one at a time as it hands them on (pkg/source/kube/paged.go). Every
// Service and EndpointSlice of a list five pages long reaches the handler
// as the API server stored it, and the initial state is declared complete
// only once the last page is handed on. The same holds with the state
// streamed as one watch-list (no list request) and in JSON; in each, the
// watch then carries a change.
func TestListPagesFromTheAPI(t *testing.T) {
	const n, pageSize, ns = 45, 10, "paged"
	single := corev1.IPFamilyPolicySingleStack
	port, portName := int32(8080), "http"
	var objs []kubeenv.StoredObject
	clusterIP := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 96, 210, byte(i)}) }
	backend := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, 210, byte(i)}) }
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP(i).String(), ClusterIPs: []string{clusterIP(i).String()},
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single, SessionAffinity: corev1.ServiceAffinityNone,
				Ports: []corev1.ServicePort{{Name: portName, Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port)}},
			},
		}
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{backend(i).String()}}},
		}
		objs = append(objs,
			kubeenv.StoredObject{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: svc},
			kubeenv.StoredObject{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: sl})
	}
	if err := env.StoreDirect(ctx(t), objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := context.Background()
		_ = env.Client.DiscoveryV1().EndpointSlices(ns).DeleteCollection(c, metav1.DeleteOptions{}, metav1.ListOptions{})
		for i := range n {
			_ = env.Client.CoreV1().Services(ns).Delete(c, fmt.Sprintf("svc-%d", i), metav1.DeleteOptions{})
		}
	})
	testenv.WaitFor(t, bound, "the API server to serve the stored Services", func() bool {
		l, err := env.Client.CoreV1().Services(ns).List(ctx(t), metav1.ListOptions{})
		return err == nil && len(l.Items) == n
	})

	for _, c := range []struct {
		name      string
		watchList bool
		json      bool
	}{{"paged lists, protobuf", false, false}, {"watch-list, protobuf", true, false}, {"paged lists, JSON", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			cfg, requests := recordRequests(env.Config)
			if c.json {
				cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
			}
			r := &recorder{services: map[types.NamespacedName]*model.Service{}, slices: map[types.NamespacedName]*model.EndpointSlice{}, synced: make(chan struct{})}
			src := &kube.Source{Config: cfg, Report: report.New(), PageSize: pageSize, WatchList: c.watchList}
			run, stop := context.WithCancel(ctx(t))
			done := make(chan error, 1)
			go func() { done <- src.Run(run, r) }()
			defer func() { stop(); <-done }()
			testenv.WaitFor(t, bound, "the source's initial lists", func() bool {
				select {
				case <-r.synced:
					return true
				default:
					return false
				}
			})
			checkListed(t, r, n, pageSize, ns, clusterIP, backend)

			// What went on the wire, for the Services: pages, or one
			// watch that began with every object; in the encoding asked.
			// (Other tests' Services are listed too: at least n/pageSize.)
			lists, watchLists, accepts := requests("services")
			if c.watchList && (lists != 0 || watchLists != 1) {
				t.Errorf("Services: %d list requests and %d watch-lists, want one watch-list alone", lists, watchLists)
			}
			if !c.watchList && (lists < (n+pageSize-1)/pageSize || watchLists != 0) {
				t.Errorf("Services: %d list requests and %d watch-lists, want at least %d pages and no watch-list", lists, watchLists, (n+pageSize-1)/pageSize)
			}
			wantAccept := runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
			if c.json {
				wantAccept = runtime.ContentTypeJSON
			}
			if !slices.Equal(accepts, []string{wantAccept}) {
				t.Errorf("Services asked for in %q, want %q", accepts, wantAccept)
			}

			// And the watch carries a change.
			name := "after-sync-" + strings.ReplaceAll(strings.ToLower(c.name), ", ", "-")
			name = strings.ReplaceAll(name, " ", "-")
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, // "paged" is only in etcd
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 81, Protocol: corev1.ProtocolTCP}}}}
			if _, err := env.Client.CoreV1().Services("default").Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = env.Client.CoreV1().Services("default").Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			testenv.WaitFor(t, bound, "the Service created after the sync delivered", func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				return r.services[types.NamespacedName{Namespace: "default", Name: name}] != nil
			})
		})
	}
}

// TestListerFromTheAPI: kube.Lister, the LoadBalancer IP assigner's reader
// of every Service, lists in pages it reads an item at a time, as the
// source does: each stored Service reaches it once, decoded as stored,
// over as many requests as pages, each asking for the page size given;
// and the resource version it returns is one a watch starts from.
func TestListerFromTheAPI(t *testing.T) {
	const n, pageSize, ns = 25, 10, "lister"
	var objs []kubeenv.StoredObject
	clusterIP := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 96, 211, byte(i)}) }
	for i := range n {
		ip := clusterIP(i).String()
		objs = append(objs, kubeenv.StoredObject{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion,
			Object: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d", i), Namespace: ns},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
					IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, SessionAffinity: corev1.ServiceAffinityNone,
					Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}}}})
	}
	if err := env.StoreDirect(ctx(t), objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := range n {
			_ = env.Client.CoreV1().Services(ns).Delete(context.Background(), fmt.Sprintf("svc-%d", i), metav1.DeleteOptions{})
		}
	})
	testenv.WaitFor(t, bound, "the API server to serve the stored Services", func() bool {
		l, err := env.Client.CoreV1().Services(ns).List(ctx(t), metav1.ListOptions{})
		return err == nil && len(l.Items) == n
	})

	cfg, limits := recordLimits(env.Config)
	l, err := kube.NewServiceLister(cfg, pageSize, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	total := 0
	rv, err := l.Each(ctx(t), func(o runtime.Object) error {
		svc := o.(*corev1.Service)
		total++
		if svc.Namespace == ns {
			seen[svc.Name]++
			if i := strings.TrimPrefix(svc.Name, "svc-"); svc.Spec.ClusterIP != clusterIP(atoi(t, i)).String() {
				t.Errorf("Service %s listed with ClusterIP %q, want %s", svc.Name, svc.Spec.ClusterIP, clusterIP(atoi(t, i)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if name := fmt.Sprintf("svc-%d", i); seen[name] != 1 {
			t.Errorf("Service %s/%s listed %d times, want once", ns, name, seen[name])
		}
	}
	// Every Service of the cluster (other tests' too) came in pages of
	// pageSize: one request per page, each asking for pageSize.
	got := limits("services")
	if want := (total + pageSize - 1) / pageSize; len(got) != want {
		t.Errorf("%d Services listed in %d requests, want %d (pages of %d)", total, len(got), want, pageSize)
	}
	for _, lim := range got {
		if lim != strconv.Itoa(pageSize) {
			t.Errorf("a page asked for limit %q, want %d", lim, pageSize)
		}
	}

	// A filter on the encoding: what it rejects is not handed on.
	keepOne, err := kube.NewServiceLister(env.Config, pageSize, func(b []byte) bool {
		var svc corev1.Service
		return svc.Unmarshal(b) == nil && svc.Namespace == ns && svc.Name == "svc-3"
	})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	if _, err := keepOne.Each(ctx(t), func(o runtime.Object) error {
		kept = append(kept, o.(*corev1.Service).Namespace+"/"+o.(*corev1.Service).Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept, []string{ns + "/svc-3"}) {
		t.Errorf("a Lister keeping %s/svc-3 alone handed on %v", ns, kept)
	}

	// A watch from the list's version carries what comes after it.
	w, err := l.Watch(ctx(t), metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lister-after", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 81, Protocol: corev1.ProtocolTCP}}}}
	if _, err := env.Client.CoreV1().Services("default").Create(ctx(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.CoreV1().Services("default").Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
	})
	deadline := time.After(bound)
	for {
		select {
		case ev := <-w.ResultChan():
			if s, ok := ev.Object.(*corev1.Service); ok && s.Name == svc.Name {
				if ev.Type != watch.Added {
					t.Errorf("the Service created after the list watched as %s, want ADDED", ev.Type)
				}
				return
			}
			if s, ok := ev.Object.(*corev1.Service); ok && s.Namespace == ns {
				t.Errorf("the watch from the list's version %s replayed listed Service %s (%s)", rv, s.Name, ev.Type)
			}
		case <-deadline:
			t.Fatalf("the Service created after the list never reached a watch from its version %s", rv)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	i, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// recordLimits is cfg with the limit of every list request recorded:
// limits(resource) lists them, in order.
func recordLimits(cfg *rest.Config) (*rest.Config, func(resource string) []string) {
	c, seen := recordAll(cfg)
	return c, func(resource string) (limits []string) {
		for _, req := range seen() {
			if q := req.URL.Query(); path.Base(req.URL.Path) == resource && q.Get("watch") != "true" {
				limits = append(limits, q.Get("limit"))
			}
		}
		return limits
	}
}

// checkListed: every Service and EndpointSlice stored reached the handler
// as stored, all of them before the initial state was declared complete.
func checkListed(t *testing.T, r *recorder, n, pageSize int, ns string, clusterIP, backend func(int) netip.Addr) {
	t.Helper()
	port := int32(8080)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.atSync[0] < n || r.atSync[1] < n {
		t.Errorf("declared synced holding %d Services and %d EndpointSlices, before the last page (%d each, in pages of %d)", r.atSync[0], r.atSync[1], n, pageSize)
	}
	for i := range n {
		k := types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("svc-%d", i)}
		svc, sl := r.services[k], r.slices[k]
		switch {
		case svc == nil:
			t.Errorf("Service %s not handed on", k)
		case len(svc.ClusterIPs()) != 1 || svc.ClusterIPs()[0] != clusterIP(i) || len(svc.Ports()) != 1 || svc.Ports()[0].Port != 80:
			t.Errorf("Service %s handed on as %+v, want ClusterIP %s port 80", k, svc, clusterIP(i))
		}
		switch {
		case sl == nil:
			t.Errorf("EndpointSlice %s not handed on", k)
		case len(sl.Endpoints) != 1 || sl.Addr(&sl.Endpoints[0]) != backend(i) || len(sl.Ports()) != 1 || sl.Ports()[0].Port != uint16(port):
			t.Errorf("EndpointSlice %s handed on as %+v, want endpoint %s port %d", k, sl, backend(i), port)
		}
	}
}

// recordRequests is cfg with every request to the API server recorded:
// requests(resource) counts its list requests and its watch-lists, and
// the encodings it was asked for.
func recordRequests(cfg *rest.Config) (*rest.Config, func(resource string) (lists, watchLists int, accepts []string)) {
	c, seen := recordAll(cfg)
	return c, func(resource string) (lists, watchLists int, accepts []string) {
		for _, req := range seen() {
			if path.Base(req.URL.Path) != resource {
				continue
			}
			q := req.URL.Query()
			switch {
			case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
				watchLists++
			case q.Get("watch") != "true":
				lists++
			}
			if a := req.Header.Get("Accept"); !slices.Contains(accepts, a) {
				accepts = append(accepts, a)
			}
		}
		return lists, watchLists, accepts
	}
}

// recordAll is cfg with every request to the API server kept: seen()
// returns them so far, in order.
func recordAll(cfg *rest.Config) (*rest.Config, func() []*http.Request) {
	var mu sync.Mutex
	var seen []*http.Request
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			seen = append(seen, req)
			mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	return c, func() []*http.Request {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
