package lb

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
)

// BenchmarkInitialSync: the first full sync (empty maps) and a restart's
// (maps already right) of n Services with one endpoint each, on real BPF
// maps, without an API server in the way. `netcube-lab bench sync` measures the
// same through a real kube-apiserver where that is practical.
func BenchmarkInitialSync(b *testing.B) {
	testenv.RequireRoot(b)
	for _, n := range []int{10000, 100000} {
		for _, restart := range []bool{false, true} {
			name := fmt.Sprintf("services=%d/first", n)
			if restart {
				name = fmt.Sprintf("services=%d/restart", n)
			}
			b.Run(name, func(b *testing.B) {
				sizes := map[string]uint32{"lb_services": 4 * uint32(n), "lb_backends": 2 * uint32(n), "lb_revnat": 2 * uint32(n), "lb_vips": 2 * uint32(n)}
				for b.Loop() {
					b.StopTimer()
					dp, err := datapath.Load(datapath.Config{MapSizes: sizes})
					if err != nil {
						b.Fatal(err)
					}
					feed := func(r *Reconciler) {
						for i := range n {
							r.OnService(svcKey(i), svc(i))
							r.OnEndpointSlice(sliceKey(i), slice(i, ep(i, 0)))
						}
						r.OnSynced()
					}
					if restart { // program once, then measure a second agent against the same maps
						first := NewReconciler(New(dp.Maps()), nil)
						feed(first)
						if err := first.Sync(); err != nil {
							b.Fatal(err)
						}
					}
					cube := New(dp.Maps())
					if restart {
						if cube, err = Restore(dp.Maps()); err != nil {
							b.Fatal(err)
						}
					}
					r := NewReconciler(cube, nil)
					feed(r)
					b.StartTimer()
					if err := r.Sync(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					dp.Close()
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkRetainedPerService: the heap the agent keeps per Service (one
// port, one endpoint per family) once everything is applied: the
// reconciler's view of the cluster plus the lb cube's bookkeeping, for
// single-stack Services and for dual-stack ones (two ClusterIPs, an
// EndpointSlice per family, as in bench compare). At 100,000 Services this
// is most of the agent's memory. With NETCUBE_HEAP_PROFILE=<file>, the
// dual-stack heap is written there as a pprof profile while it is held
// (docs/benchmarks/memory-profile.md).
func BenchmarkRetainedPerService(b *testing.B) {
	testenv.RequireRoot(b)
	const n = 100000
	for _, dual := range []bool{false, true} {
		name := "family=single"
		if dual {
			name = "family=dual"
		}
		b.Run(name, func(b *testing.B) {
			sizes := map[string]uint32{"lb_services": 8 * n, "lb_backends": 4 * n, "lb_revnat": 4 * n, "lb_vips": 4 * n}
			for b.Loop() {
				dp, err := datapath.Load(datapath.Config{MapSizes: sizes})
				if err != nil {
					b.Fatal(err)
				}
				base := heapInUse()
				r := NewReconciler(New(dp.Maps()), nil)
				for i := range n {
					if !dual {
						r.OnService(svcKey(i), svc(i))
						r.OnEndpointSlice(sliceKey(i), slice(i, ep(i, 0)))
						continue
					}
					r.OnService(svcKey(i), dualStackService(i))
					for _, v6 := range []bool{false, true} {
						key, s := dualStackSlice(i, v6)
						r.OnEndpointSlice(key, s)
					}
				}
				delivered := heapInUse()
				r.OnSynced()
				if err := r.Sync(); err != nil {
					b.Fatal(err)
				}
				applied := heapInUse()
				b.ReportMetric(float64(delivered-base)/n, "B-delivered/service")
				b.ReportMetric(float64(applied-base)/n, "B-applied/service")
				if path := os.Getenv("NETCUBE_HEAP_PROFILE"); path != "" && dual {
					f, err := os.Create(path)
					if err != nil {
						b.Fatal(err)
					}
					if err := pprof.WriteHeapProfile(f); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
				runtime.KeepAlive(r)
				dp.Close()
			}
		})
	}
}

// dualStackService is Service i with an IPv4 and an IPv6 ClusterIP.
func dualStackService(i int) *model.Service {
	v4 := netip.AddrFrom4([4]byte{10, byte(96 + i>>16), byte(i >> 8), byte(i)}).String()
	v6 := fmt.Sprintf("fd00:10:96::%x:%x", i>>16, i&0xffff)
	return must(k8s.ToService(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: v4, ClusterIPs: []string{v4, v6}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}))
}

// dualStackSlice is Service i's EndpointSlice of one family, one endpoint.
func dualStackSlice(i int, v6 bool) (types.NamespacedName, *model.EndpointSlice) {
	port, proto, name := int32(8080), corev1.ProtocolTCP, ""
	at, addr, suffix := discoveryv1.AddressTypeIPv4, ep(i, 0), "v4"
	if v6 {
		at, addr, suffix = discoveryv1.AddressTypeIPv6, fmt.Sprintf("fd00:10:244::%x:%x", i>>16, i&0xffff), "v6"
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d-%s", i, suffix), Namespace: "default",
			Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("s%d", i)}},
		AddressType: at,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
	}
	return types.NamespacedName{Namespace: "default", Name: s.Name}, must(k8s.ToEndpointSlice(s))
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkRestore: a restarted agent rebuilding the cube's view from
// the maps an earlier one left pinned (Restore), at 100,000 Services of
// one and of ten endpoints; the maps are read in batches
// (kernelMap.LookupBatches). Prints ns per Service restored.
func BenchmarkRestore(b *testing.B) {
	testenv.RequireRoot(b)
	const n = 100000
	for _, eps := range []int{1, 10} {
		b.Run(fmt.Sprintf("services=%d/endpoints=%d", n, eps), func(b *testing.B) {
			sizes := map[string]uint32{"lb_services": uint32(n * (eps + 2)), "lb_backends": uint32(n*eps + n), "lb_revnat": 2 * n, "lb_vips": 2 * n}
			dp, err := datapath.Load(datapath.Config{MapSizes: sizes})
			if err != nil {
				b.Fatal(err)
			}
			defer dp.Close()
			first := NewReconciler(New(dp.Maps()), nil)
			for i := range n {
				addrs := make([]string, eps)
				for j := range addrs {
					addrs[j] = ep(i, j)
				}
				first.OnService(svcKey(i), svc(i))
				first.OnEndpointSlice(sliceKey(i), slice(i, addrs...))
			}
			first.OnSynced()
			if err := first.Sync(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				c, err := Restore(dp.Maps())
				if err != nil {
					b.Fatal(err)
				}
				if got := len(c.Frontends()); got != n {
					b.Fatalf("restored %d frontends, want %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/service")
		})
	}
}
