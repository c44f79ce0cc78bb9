package lb

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
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
// port, one endpoint) once everything is applied: the reconciler's view of
// the cluster plus the lb cube's bookkeeping. At 100,000 Services this is
// most of the agent's memory.
func BenchmarkRetainedPerService(b *testing.B) {
	testenv.RequireRoot(b)
	const n = 100000
	sizes := map[string]uint32{"lb_services": 4 * n, "lb_backends": 2 * n, "lb_revnat": 2 * n, "lb_vips": 2 * n}
	for b.Loop() {
		dp, err := datapath.Load(datapath.Config{MapSizes: sizes})
		if err != nil {
			b.Fatal(err)
		}
		base := heapInUse()
		r := NewReconciler(New(dp.Maps()), nil)
		for i := range n {
			r.OnService(svcKey(i), svc(i))
			r.OnEndpointSlice(sliceKey(i), slice(i, ep(i, 0)))
		}
		delivered := heapInUse()
		r.OnSynced()
		if err := r.Sync(); err != nil {
			b.Fatal(err)
		}
		applied := heapInUse()
		b.ReportMetric(float64(delivered-base)/n, "B-delivered/service")
		b.ReportMetric(float64(applied-base)/n, "B-applied/service")
		runtime.KeepAlive(r)
		dp.Close()
	}
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
