package controlplane

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

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
// only once the last page is handed on.
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

	r := &recorder{services: map[types.NamespacedName]*model.Service{}, slices: map[types.NamespacedName]*model.EndpointSlice{}, synced: make(chan struct{})}
	src := &kube.Source{Config: env.Config, Report: report.New(), PageSize: pageSize}
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
		case len(svc.ClusterIPs) != 1 || svc.ClusterIPs[0] != clusterIP(i) || len(svc.Ports) != 1 || svc.Ports[0].Port != 80:
			t.Errorf("Service %s handed on as %+v, want ClusterIP %s port 80", k, svc, clusterIP(i))
		}
		switch {
		case sl == nil:
			t.Errorf("EndpointSlice %s not handed on", k)
		case len(sl.Endpoints) != 1 || sl.Addr(&sl.Endpoints[0]) != backend(i) || len(sl.Ports) != 1 || sl.Ports[0].Port != uint16(port):
			t.Errorf("EndpointSlice %s handed on as %+v, want endpoint %s port %d", k, sl, backend(i), port)
		}
	}
}
