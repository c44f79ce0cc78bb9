package datapath_test

import (
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cni"
	"github.com/netcube/netcube/pkg/datapath"
)

// TestPodAttachment: a pod's veth gets from_pod and to_pod as tc filters,
// without a pin; an agent's restart replaces them (still one each); a pod
// an earlier agent attached with tcx links keeps its links, updated, and
// gets no filter beside them (which would run its packets twice); the
// agent's cleanup removes the filters of the pods' veths and only theirs.
func TestPodAttachment(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.EnsureBPFFS(t)
	dp, pins := loadPinned(t, "ncpodf")
	prefix := fmt.Sprintf("ncf%d", os.Getpid()%10000)
	veth := func(name string) int {
		t.Helper()
		if out, err := exec.Command("ip", "link", "add", name, "type", "veth", "peer", "name", name+"p").CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		return ifc.Index
	}
	filters := func(name string) map[string]string {
		t.Helper()
		fs, err := datapath.PodFilters(name)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	count := func(name string) int {
		t.Helper()
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, _ := netlink.FilterList(l, parent)
			n += len(fs)
		}
		return n
	}
	want := map[string]string{"ingress": "from_pod", "egress": "to_pod"}

	a, b, other := prefix+"a", prefix+"b", fmt.Sprintf("ncg%d", os.Getpid()%10000)
	ia, ib, io := veth(a), veth(b), veth(other)
	if err := dp.AttachPod(a, ia); err != nil {
		t.Fatal(err)
	}
	if got := filters(a); !maps.Equal(got, want) {
		t.Fatalf("a new pod's veth: filters %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(pins, "links", "pod-"+a+"-ingress")); err == nil {
		t.Errorf("a new pod's veth has a pinned tcx link too")
	}
	if err := dp.AttachPod(a, ia); err != nil {
		t.Fatal(err)
	}
	if got, n := filters(a), count(a); !maps.Equal(got, want) || n != 2 {
		t.Errorf("attached again (a restart): filters %v (%d in all), want %v, one each", got, n, want)
	}

	if err := dp.AttachPodTCX(b, ib); err != nil {
		t.Fatal(err)
	}
	if err := dp.AttachPod(b, ib); err != nil {
		t.Fatal(err)
	}
	if n := count(b); n != 0 {
		t.Errorf("a pod an earlier agent attached with tcx: %d filters beside its links, want 0", n)
	}
	if _, err := os.Stat(filepath.Join(pins, "links", "pod-"+b+"-ingress")); err != nil {
		t.Errorf("a pod an earlier agent attached with tcx lost its link: %v", err)
	}

	if err := dp.AttachPod(other, io); err != nil {
		t.Fatal(err)
	}
	if err := datapath.DetachPods(prefix); err != nil {
		t.Fatal(err)
	}
	if n := count(a); n != 0 {
		t.Errorf("after the cleanup: %d filters on %s, want 0", n, a)
	}
	if got := filters(other); !maps.Equal(got, want) {
		t.Errorf("after the cleanup of %s*: %s (another prefix) has %v, want its filters kept", prefix, other, got)
	}
}

// TestPodAttachmentNetkit: a netkit pod's pair gets from_pod_netkit (peer)
// and to_pod_netkit (primary) as its own programs, without a pin; an
// agent's restart swaps them in place (still one each, new programs); the
// agent's cleanup takes them off.
func TestPodAttachmentNetkit(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.EnsureBPFFS(t)
	if err := cni.ProbeNetkit(); err != nil {
		t.Skip("this kernel makes no netkit pair:", err)
	}
	load := func() *datapath.Datapath {
		dp, _ := loadPinned(t, "ncpodk")
		return dp
	}
	prefix := fmt.Sprintf("nck%d", os.Getpid()%10000)
	name := prefix + "a"
	la := netlink.NewLinkAttrs()
	la.Name = name
	nk := &netlink.Netkit{LinkAttrs: la, Mode: netlink.NETKIT_MODE_L2, PeerPolicy: netlink.NETKIT_POLICY_BLACKHOLE}
	peer := netlink.NewLinkAttrs()
	peer.Name = name + "p"
	nk.SetPeerAttrs(&peer)
	if err := netlink.LinkAdd(nk); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netlink.LinkDel(nk) })
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	// programs: the IDs on each hook, by the name PodFilters gives.
	programs := func() map[string][]ebpf.ProgramID {
		t.Helper()
		out := map[string][]ebpf.ProgramID{}
		for dir, attach := range map[string]ebpf.AttachType{"ingress": ebpf.AttachNetkitPeer, "egress": ebpf.AttachNetkitPrimary} {
			res, err := link.QueryPrograms(link.QueryOptions{Target: ifc.Index, Attach: attach})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range res.Programs {
				out[dir] = append(out[dir], p.ID)
			}
		}
		return out
	}
	want := map[string]string{"ingress": "from_pod_netkit", "egress": "to_pod_netkit"}

	if got, err := datapath.PodFilters(name); err != nil || len(got) != 0 {
		t.Fatalf("a new pair: %v, %v; want no program", got, err)
	}
	if err := load().AttachPod(name, ifc.Index); err != nil {
		t.Fatal(err)
	}
	first := programs()
	if got, err := datapath.PodFilters(name); err != nil || !maps.Equal(got, want) {
		t.Fatalf("attached: %v, %v; want %v", got, err, want)
	}
	if err := load().AttachPod(name, ifc.Index); err != nil { // a restarted agent's own programs
		t.Fatal(err)
	}
	second := programs()
	for dir := range want {
		if len(first[dir]) != 1 || len(second[dir]) != 1 || first[dir][0] == second[dir][0] {
			t.Errorf("%s: programs %v, then after a restart %v; want one each, the second agent's", dir, first[dir], second[dir])
		}
	}
	if err := datapath.DetachPods(prefix); err != nil {
		t.Fatal(err)
	}
	if got := programs(); len(got) != 0 {
		t.Errorf("after the cleanup: %v, want none", got)
	}
}

// loadPinned loads the object with its maps pinned under a directory of
// its own (removed, with the pins, when the test ends).
func loadPinned(t *testing.T, name string) (*datapath.Datapath, string) {
	t.Helper()
	pins := filepath.Join(datapath.BPFFS, testenv.Name(name))
	dp, err := loadTrusting(datapath.Config{PinDir: pins})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dp.Close()
		if err := datapath.Unpin(pins); err != nil {
			t.Error(err)
		}
	})
	return dp, pins
}
