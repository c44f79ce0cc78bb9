package lb

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// claimant is a Service named name, created at created (zero: unknown),
// on the external IP 192.0.2.1:80 (which the API server lets several
// Services use), with its own ClusterIP.
func claimant(name string, created int64, clusterIP string) *model.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, ExternalIPs: []string{"192.0.2.1"},
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if created != 0 {
		s.CreationTimestamp = metav1.NewTime(time.Unix(created, 0))
	}
	return must(k8s.ToService(s))
}

var shared = model.Frontend{Addr: mustAddr("192.0.2.1"), Port: 80, Proto: model.TCP}

// TestFrontendConflicts: two Services claiming one frontend: the older one
// is programmed whichever arrives first, the other is reported naming both;
// deleting either never leaves the survivor unserved.
func TestFrontendConflicts(t *testing.T) {
	for _, initial := range []bool{false, true} {
		name := "after the initial sync"
		if initial {
			name = "in the initial sync"
		}
		t.Run(name, func(t *testing.T) {
			cube := New(newMaps(t, nil))
			r := NewReconciler(cube, nil)
			rep := report.New()
			r.SetReporter(rep)
			key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "default", Name: n} }
			backendOf := func() string {
				bs := cube.Backends(shared)
				if len(bs) != 1 {
					return "none"
				}
				return bs[0].String()
			}
			sync := func() {
				t.Helper()
				if err := r.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if !initial {
				r.OnSynced()
			}
			// The newer Service arrives first.
			r.OnService(key("newer"), claimant("newer", 2000, "10.96.0.2"))
			r.OnEndpointSlice(key("newer-1"), sliceFor("newer", "10.1.0.2"))
			if !initial {
				sync()
				if got := backendOf(); got != "10.1.0.2:8080" {
					t.Fatalf("alone, newer's frontend has backend %s", got)
				}
			}
			r.OnService(key("older"), claimant("older", 1000, "10.96.0.1"))
			r.OnEndpointSlice(key("older-1"), sliceFor("older", "10.1.0.1"))
			if initial {
				r.OnSynced()
			}
			sync()
			if got := backendOf(); got != "10.1.0.1:8080" {
				t.Fatalf("shared frontend has backend %s, want the older Service's 10.1.0.1:8080", got)
			}
			ps := rep.Standing()
			if len(ps) != 1 || ps[0].Object.Name != "newer" || ps[0].Reason != report.FrontendConflict ||
				!strings.Contains(ps[0].Message, "192.0.2.1:80/TCP is also claimed by Service default/older") {
				t.Fatalf("reports %+v, want newer's conflict naming older", ps)
			}
			// Both keep their own ClusterIPs.
			if len(cube.Frontends()) != 3 {
				t.Fatalf("frontends %v, want 2 ClusterIPs and the shared one", cube.Frontends())
			}

			// The owner goes: the other takes the frontend over.
			r.OnService(key("older"), nil)
			sync()
			if got := backendOf(); got != "10.1.0.2:8080" {
				t.Fatalf("after the owner's deletion the frontend has backend %s, want newer's 10.1.0.2:8080", got)
			}
			if ps := rep.Standing(); len(ps) != 0 {
				t.Fatalf("conflict still reported: %+v", ps)
			}
			r.OnService(key("newer"), nil)
			sync()
			if fes := cube.Frontends(); len(fes) != 0 {
				t.Fatalf("frontends %v left after both Services went", fes)
			}
		})
	}
}

// TestFrontendConflictTie: with no creation times (manifest files), the
// first by namespace/name owns the frontend, and the loser's deletion
// leaves it alone.
func TestFrontendConflictTie(t *testing.T) {
	cube := New(newMaps(t, nil))
	r := NewReconciler(cube, nil)
	r.OnSynced()
	key := func(n string) types.NamespacedName { return types.NamespacedName{Namespace: "default", Name: n} }
	r.OnService(key("b"), claimant("b", 0, "10.96.0.2"))
	r.OnEndpointSlice(key("b-1"), sliceFor("b", "10.1.0.2"))
	r.OnService(key("a"), claimant("a", 0, "10.96.0.1"))
	r.OnEndpointSlice(key("a-1"), sliceFor("a", "10.1.0.1"))
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if bs := cube.Backends(shared); len(bs) != 1 || bs[0].String() != "10.1.0.1:8080" {
		t.Fatalf("backends %v, want a's", bs)
	}
	r.OnService(key("b"), nil)
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if bs := cube.Backends(shared); len(bs) != 1 || bs[0].String() != "10.1.0.1:8080" {
		t.Fatalf("after the loser's deletion: backends %v, want a's still", bs)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// sliceFor is an IPv4 EndpointSlice of Service name with one endpoint on
// port 8080.
func sliceFor(name, addr string) *model.EndpointSlice {
	port, proto, pname := int32(8080), corev1.ProtocolTCP, ""
	return must(k8s.ToEndpointSlice(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-1", Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
	}))
}

// TestOwnerKeysAreFrontends: owners.of is keyed by the frontend's
// lb_services key, which the local API turns back into the frontend: the
// two must name the same frontend for every family, protocol and scope,
// and distinct frontends must not share a key.
func TestOwnerKeysAreFrontends(t *testing.T) {
	seen := map[any]model.Frontend{}
	for _, addr := range []string{"10.96.0.10", "fd00::10", "0.0.0.0", "::"} {
		for _, proto := range []model.Proto{model.TCP, model.UDP, model.SCTP} {
			for _, internal := range []bool{false, true} {
				fe := model.Frontend{Addr: netip.MustParseAddr(addr), Port: 8080, Proto: proto, Internal: internal}
				k := ownerKey(fe)
				if back := frontendOf(k); back != fe {
					t.Errorf("%s: key %+v reads back as %s", fe, k, back)
				}
				if other, ok := seen[k]; ok {
					t.Errorf("%s and %s share key %+v", fe, other, k)
				}
				seen[k] = fe
			}
		}
	}
}
