package podnetns

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/internal/testenv"
)

// TestIndexNamesANamespaceByItsCookie: a namespace under the directory is
// found by its cookie, with its address of each family; the cookie is the
// one a socket made in it reports (the namespace of this test's process
// is its own control: its cookie is not the new namespace's).
func TestIndexNamesANamespaceByItsCookie(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Name("pn")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{
		{"link", "add", "d0", "type", "veth", "peer", "name", "d1"},
		{"addr", "add", "10.123.4.5/24", "dev", "d0"},
		{"addr", "add", "fd00:123::5/64", "dev", "d0", "nodad"},
		{"link", "set", "d0", "up"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", name}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	cookie, addrs, err := read(filepath.Join(Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	own, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		t.Fatal(err)
	}
	if cookie == 0 || cookie == own {
		t.Fatalf("the new namespace's cookie %d (this process's: %d)", cookie, own)
	}
	if len(addrs) != 2 {
		t.Errorf("addresses %v, want 10.123.4.5 and fd00:123::5", addrs)
	}
	x := &Index{Dir: Dir}
	if a, ok := x.AddrOf(cookie, 4); !ok || a != netip.MustParseAddr("10.123.4.5") {
		t.Errorf("AddrOf(%d, 4) = %v, %v", cookie, a, ok)
	}
	if a, ok := x.AddrOf(cookie, 6); !ok || a != netip.MustParseAddr("fd00:123::5") {
		t.Errorf("AddrOf(%d, 6) = %v, %v", cookie, a, ok)
	}
	if _, ok := x.AddrOf(own, 4); ok {
		t.Error("this process's namespace (not under the directory) was named")
	}
	if _, err := os.Stat(filepath.Join(Dir, name)); err != nil {
		t.Fatal(err)
	}
}
