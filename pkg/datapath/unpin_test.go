package datapath_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/netcube/netcube/internal/testenv"
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
		dp, err := loadTrusting(datapath.Config{PinDir: pins})
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

// TestRetiredPinsRemoved: an upgrade from an agent that pinned a map this
// one no longer has (pol_flows, the policy cube's records before they
// moved into conntrack) leaves no pin of it behind; the maps this agent
// does have stay pinned (the positive control).
func TestRetiredPinsRemoved(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.EnsureBPFFS(t)
	pins := filepath.Join(datapath.BPFFS, testenv.Name("netcube-test-retired-"))
	t.Cleanup(func() { _ = datapath.Unpin(pins) })
	if err := os.MkdirAll(pins, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := ebpf.NewMap(&ebpf.MapSpec{Name: "pol_flows", Type: ebpf.LRUHash, KeySize: 4, ValueSize: 8, MaxEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Pin(filepath.Join(pins, "pol_flows")); err != nil {
		t.Fatal(err)
	}
	dp, err := loadTrusting(datapath.Config{PinDir: pins})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if _, err := os.Stat(filepath.Join(pins, "ct_flows")); err != nil {
		t.Fatalf("this agent's conntrack map not pinned: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pins, "pol_flows")); !os.IsNotExist(err) {
		t.Errorf("the retired pol_flows pin is still there (stat: %v)", err)
	}
}
