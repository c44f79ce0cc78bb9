package lb

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
)

func svc(i int) *model.Service {
	return must(k8s.ToService(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: "default"},
		Spec: corev1.ServiceSpec{
			ClusterIP: netip.AddrFrom4([4]byte{10, byte(96 + i>>16), byte(i >> 8), byte(i)}).String(),
			Ports:     []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}))
}

func slice(i int, endpoints ...string) *model.EndpointSlice {
	return sliceAnnotated(i, nil, endpoints...)
}

// sliceAnnotated is slice with the EndpointSlice's annotations.
func sliceAnnotated(i int, annotations map[string]string, endpoints ...string) *model.EndpointSlice {
	port, proto, name := int32(8080), corev1.ProtocolTCP, ""
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("s%d-abc", i), Namespace: "default", Annotations: annotations,
			Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("s%d", i)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for _, e := range endpoints {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e}})
	}
	return must(k8s.ToEndpointSlice(s))
}

func svcKey(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("s%d", i)}
}

func sliceKey(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "default", Name: fmt.Sprintf("s%d-abc", i)}
}

func ep(i, j int) string {
	return netip.AddrFrom4([4]byte{10, byte(128 + 2*j + i>>16), byte(i >> 8), byte(i)}).String()
}

func opsOf(c *Tables) int { return c.Ops().Updates + c.Ops().Deletes }

// TestOneChangeAmongManyServices: with 10,000 Services programmed, one
// endpoint change costs a handful of map operations, not a rebuild.
func TestOneChangeAmongManyServices(t *testing.T) {
	cube := New(newMaps(t, nil))
	r := NewReconciler(cube, nil)

	const n = 10000
	for i := range n {
		r.OnService(svcKey(i), svc(i))
		r.OnEndpointSlice(sliceKey(i), slice(i, ep(i, 0), ep(i, 1)))
	}
	r.OnSynced()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := len(cube.Frontends()); got != n {
		t.Fatalf("%d frontends programmed, want %d", got, n)
	}

	cases := []struct {
		name   string
		change func()
		maxOps int
	}{
		{"endpoint added", func() { r.OnEndpointSlice(sliceKey(7), slice(7, ep(7, 0), ep(7, 1), ep(7, 2))) }, 3},
		{"endpoint removed", func() { r.OnEndpointSlice(sliceKey(7), slice(7, ep(7, 0), ep(7, 2))) }, 4},
		{"slice deleted (no endpoints: rejects)", func() { r.OnEndpointSlice(sliceKey(7), nil) }, 5},
		// Master, two slots, two backends, revNAT and the ClusterIP's
		// address in lb_vips.
		{"Service deleted", func() { r.OnService(svcKey(8), nil) }, 7},
		{"Service added", func() { r.OnService(svcKey(8), svc(8)) }, 7},
		{"unrelated no-op update", func() { r.OnService(svcKey(9), svc(9)) }, 0},
	}
	for _, c := range cases {
		before := opsOf(cube)
		c.change()
		if err := r.Sync(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ops := opsOf(cube) - before; ops > c.maxOps {
			t.Errorf("%s: %d map operations among %d Services, want at most %d", c.name, ops, n, c.maxOps)
		}
	}
	if got := len(cube.Backends(svcFrontend(7))); got != 0 {
		t.Errorf("service 7 has %d backends after its slice was deleted", got)
	}
}

// TestFirstSyncRemovesStale: frontends left in the maps by an earlier agent
// for Services that are gone are removed by the first sync, and not before
// the source has delivered its whole initial state.
func TestFirstSyncRemovesStale(t *testing.T) {
	maps := newMaps(t, nil)
	old := NewReconciler(New(maps), nil)
	for i := range 3 {
		old.OnService(svcKey(i), svc(i))
	}
	old.OnSynced()
	if err := old.Sync(); err != nil {
		t.Fatal(err)
	}

	cube, err := Restore(maps)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(cube, nil)
	r.OnService(svcKey(0), svc(0)) // service 1 and 2 were deleted meanwhile
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := len(cube.Frontends()); got != 3 {
		t.Fatalf("before the source synced, %d frontends left; want all 3 kept", got)
	}
	r.OnSynced()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := cube.Frontends(); len(got) != 1 || got[0] != svcFrontend(0) {
		t.Fatalf("after the first sync: %v, want only service 0", got)
	}
}

func svcFrontend(i int) model.Frontend {
	return Frontends(svc(i), nil, model.Node{})[0].Frontend
}

// TestNothingAppliedBeforeInitialState: a Service delivered before its
// EndpointSlices (informers deliver kinds independently) must never be
// programmed without its endpoints: on a restart that would reject new
// connections and move established ones. Nothing is applied until the
// source's initial state is complete.
func TestNothingAppliedBeforeInitialState(t *testing.T) {
	cube := New(newMaps(t, nil))
	r := NewReconciler(cube, nil)
	r.OnService(svcKey(1), svc(1))
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := len(cube.Frontends()); n != 0 {
		t.Fatalf("%d frontends programmed before the initial state was complete", n)
	}
	r.OnEndpointSlice(sliceKey(1), slice(1, ep(1, 0)))
	r.OnSynced()
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if bs := cube.Backends(svcFrontend(1)); len(bs) != 1 {
		t.Fatalf("backends %v, want the one endpoint", bs)
	}
	// Exactly one write per entry: revNAT, backend, slot, the ClusterIP's
	// address (lb_vips), master.
	if ops := cube.Ops(); ops.Updates != 5 || ops.Deletes != 0 {
		t.Errorf("map operations %+v: the Service was programmed more than once", ops)
	}
}

// TestInitialSyncFallsBackServiceByService: when the batched initial sync
// does not fit the maps, every Service is applied on its own instead: those
// that fit are programmed, the others are reported, naming the full map, and
// retried later.
func TestInitialSyncFallsBackServiceByService(t *testing.T) {
	cube := New(newMaps(t, map[string]uint32{"lb_services": 10}))
	r := NewReconciler(cube, nil)
	for i := range 8 { // 2 lb_services entries each (master, slot): 16 > 10
		r.OnService(svcKey(i), svc(i))
		r.OnEndpointSlice(sliceKey(i), slice(i, ep(i, 0)))
	}
	r.OnSynced()
	if err := r.Sync(); err == nil {
		t.Fatal("Sync reported no error with 8 Services in room for 5")
	}
	select {
	case <-r.Synced():
	default:
		t.Fatal("the initial sync did not complete")
	}
	if n := len(cube.Frontends()); n != 5 {
		t.Errorf("%d Services programmed, want the 5 that fit", n)
	}
	fails := r.Failures()
	if len(fails) != 3 {
		t.Errorf("%d failures, want 3: %v", len(fails), fails)
	}
	for id, err := range fails {
		if !strings.Contains(err.Error(), "lb_services") {
			t.Errorf("%s: %v does not name the full map", id, err)
		}
	}
}

// TestKeysAreWhatWasDelivered: a source relisting asks the reconciler what
// it holds, to turn what the new list lacks into deletions.
func TestKeysAreWhatWasDelivered(t *testing.T) {
	r := NewReconciler(nil, nil)
	for i := range 3 {
		r.OnService(svcKey(i), svc(i))
		r.OnEndpointSlice(sliceKey(i), slice(i, ep(i, 0)))
	}
	r.OnService(svcKey(1), nil)
	r.OnEndpointSlice(sliceKey(2), nil)
	r.OnEndpointSlice(sliceKey(7), slice(7, ep(7, 0))) // a slice whose Service is not there (yet)
	sorted := func(ks []types.NamespacedName) []types.NamespacedName {
		slices.SortFunc(ks, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		return ks
	}
	if got, want := sorted(r.ServiceKeys()), []types.NamespacedName{svcKey(0), svcKey(2)}; !slices.Equal(got, want) {
		t.Errorf("ServiceKeys() = %v, want %v", got, want)
	}
	if got, want := sorted(r.EndpointSliceKeys()), []types.NamespacedName{sliceKey(0), sliceKey(1), sliceKey(7)}; !slices.Equal(got, want) {
		t.Errorf("EndpointSliceKeys() = %v, want %v", got, want)
	}
}

// must returns a conversion's result, panicking on input the test meant
// to be valid.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
