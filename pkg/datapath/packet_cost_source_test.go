package datapath_test

import (
	"net/netip"
	"testing"

	"github.com/netcube/netcube/pkg/datapath"
)

// registerPodSource makes a the source of a pod on BPF_PROG_RUN's device,
// for BenchmarkPacketPaths (hack/bench-packet-ab.sh gives earlier trees,
// which have no source check, one that does nothing).
func registerPodSource(b testing.TB, dp *datapath.Datapath, a netip.Addr) {
	podSource(b, dp, a, progRunIfindex)
}
