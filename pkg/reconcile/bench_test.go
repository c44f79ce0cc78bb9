package reconcile

import (
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/lb"
)

// BenchmarkInitialSync10k: applying 10,000 Services with one endpoint each
// to empty maps (the first full sync), per op.
func BenchmarkInitialSync10k(b *testing.B) {
	testenv.RequireRoot(b)
	const n = 10000
	for b.Loop() {
		b.StopTimer()
		dp, err := datapath.Load(datapath.Config{})
		if err != nil {
			b.Fatal(err)
		}
		r := New(lb.New(dp.Maps()), nil)
		for i := range n {
			r.OnService(key(svc(i)), svc(i))
			r.OnEndpointSlice(key(slice(i)), slice(i, ep(i, 0)))
		}
		r.OnSynced()
		b.StartTimer()
		if err := r.Sync(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		dp.Close()
		b.StartTimer()
	}
}
