package kube

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
)

func apiService(name, ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "1"},
		Spec:       corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Port: 80}}},
	}
}

// TestDeliveringStore: what the reflector hands the store reaches the
// handler converted, and a relist (Replace) reports as deleted what it no
// longer contains. The reflector itself runs against a real API server in
// test/controlplane.
func TestDeliveringStore(t *testing.T) {
	var got []string
	s := newDeliveringStore(
		func(o runtime.Object) *model.Service { return k8s.ToService(o.(*corev1.Service)) },
		func(k types.NamespacedName, svc *model.Service) {
			if svc == nil {
				got = append(got, "delete "+k.String())
			} else {
				got = append(got, k.String()+" "+svc.ClusterIPs[0].String())
			}
		})
	step := func(name string, f func() error, want ...string) {
		t.Helper()
		got = nil
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: delivered %q, want %q", name, got, want)
		}
	}
	if s.HasSynced() {
		t.Fatal("synced before the first list")
	}
	// The watch-list path: objects converted by the Transformer first.
	a, _ := s.Transformer()(apiService("a", "10.96.0.1"))
	step("first list", func() error { return s.Replace([]any{a, apiService("b", "10.96.0.2")}, "1") },
		"ns/a 10.96.0.1", "ns/b 10.96.0.2")
	if !s.HasSynced() {
		t.Error("not synced after the first list")
	}
	step("update", func() error { return s.Update(apiService("a", "10.96.0.3")) }, "ns/a 10.96.0.3")
	step("add", func() error { return s.Add(apiService("c", "10.96.0.4")) }, "ns/c 10.96.0.4")
	step("delete (tombstone)", func() error {
		return s.Delete(cache.DeletedFinalStateUnknown{Key: "ns/c", Obj: apiService("c", "10.96.0.4")})
	}, "delete ns/c")
	step("relist without b", func() error { return s.Replace([]any{apiService("a", "10.96.0.3")}, "2") },
		"delete ns/b", "ns/a 10.96.0.3")
	if _, err := s.toConverted(42); err == nil {
		t.Error("a non-object was accepted")
	}
}
