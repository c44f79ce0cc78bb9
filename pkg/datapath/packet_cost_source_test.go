package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/pkg/cubes/router"
	"github.com/netcube/netcube/pkg/datapath"
)

// registerPodSource makes a the source of a pod on BPF_PROG_RUN's device,
// for BenchmarkPacketPaths (hack/bench-packet-ab.sh gives earlier trees,
// which have no source check, one that does nothing).
func registerPodSource(b testing.TB, dp *datapath.Datapath, a netip.Addr) {
	b.Helper()
	// As the router cube writes a pod: router_sources and the device's
	// slot, the check's fast path.
	if err := router.PutSources(dp.Maps(), map[datapath.Addr]datapath.RouterSource{datapath.AddrFrom(a): {Ifindex: progRunIfindex}}); err != nil {
		b.Fatal(err)
	}
}
