package datapath_test

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/netcube/netcube/pkg/datapath"
)

// TestUnpinDetachesAtOnce: when Unpin returns (netcube-agent --cleanup, the
// benchmark handing the node to kube-proxy), no netcube program acts on a
// pod's sockets any more. Removing the link pins alone detaches them only
// some time later.
func TestUnpinDetachesAtOnce(t *testing.T) {
	cg, pins := cgroupAndPins(t, "netcube-test-unpin-")
	dir, err := os.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	attached := func() int {
		t.Helper()
		n := 0
		for _, at := range []ebpf.AttachType{ebpf.AttachCGroupInet4Connect, ebpf.AttachCGroupInet6Connect, ebpf.AttachCGroupUDP4Sendmsg} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: int(dir.Fd()), Attach: at})
			if err != nil {
				t.Fatal(err)
			}
			n += len(res.Programs)
		}
		return n
	}

	for round := 0; round < 20; round++ { // the deferred release is a race: try it often
		dp, err := datapath.Load(datapath.Config{PinDir: pins})
		if err != nil {
			t.Fatal(err)
		}
		if err := dp.AttachCgroup(cg); err != nil {
			t.Fatal(err)
		}
		dp.Close() // the agent exits; its pinned links keep the programs attached
		if n := attached(); n != 3 {
			t.Fatalf("round %d: %d socket-LB programs attached after the agent closed, want 3", round, n)
		}
		if err := datapath.Unpin(pins); err != nil {
			t.Fatal(err)
		}
		if n := attached(); n != 0 {
			t.Fatalf("round %d: %d socket-LB programs still attached when Unpin returned", round, n)
		}
	}
}
