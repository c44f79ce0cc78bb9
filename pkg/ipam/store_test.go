package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

var (
	v4 = netip.MustParsePrefix("10.244.1.0/24")
	v6 = netip.MustParsePrefix("fd00:10:244:1::/64")
)

func att(i int) Attachment { return Attachment{ContainerID: fmt.Sprintf("c%d", i), IfName: "eth0"} }

func TestAllocateOnePerFamily(t *testing.T) {
	s, _ := Open(t.TempDir())
	got, err := s.Allocate(att(1), []netip.Prefix{v4, v6})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("fd00:10:244:1::1")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if held, _ := s.Get(att(1)); fmt.Sprint(held) != fmt.Sprint(want) {
		t.Fatalf("Get: %v", held)
	}
}

func TestSecondAddForOneAttachmentIsRefused(t *testing.T) {
	s, _ := Open(t.TempDir())
	first, err := s.Allocate(att(1), []netip.Prefix{v4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allocate(att(1), []netip.Prefix{v4}); !errors.Is(err, ErrAlreadyAllocated) {
		t.Fatalf("second Allocate: %v, want ErrAlreadyAllocated", err)
	}
	all, _ := s.List()
	if len(all) != 1 || all[0].Addrs[0] != first[0] {
		t.Fatalf("state after refused ADD: %v", all)
	}
	// The same container's second interface is another attachment.
	if _, err := s.Allocate(Attachment{"c1", "net1"}, []netip.Prefix{v4}); err != nil {
		t.Fatal(err)
	}
}

func TestPersistsAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	a, err := s.Allocate(att(1), []netip.Prefix{v4, v6})
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := Open(dir) // a new process would see the same
	b, err := s2.Allocate(att(2), []netip.Prefix{v4, v6})
	if err != nil {
		t.Fatal(err)
	}
	if a[0] == b[0] || a[1] == b[1] {
		t.Fatalf("handed out twice across a restart: %v and %v", a, b)
	}
	if held, _ := s2.Get(att(1)); fmt.Sprint(held) != fmt.Sprint(a) {
		t.Fatalf("restart lost %v: %v", a, held)
	}
}

func TestExhaustionIsAllOrNothing(t *testing.T) {
	s, _ := Open(t.TempDir())
	small := netip.MustParsePrefix("10.9.0.0/30") // .1 and .2: .0 network, .3 broadcast
	for i := 1; i <= 2; i++ {
		if _, err := s.Allocate(att(i), []netip.Prefix{v6, small}); err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
	}
	_, err := s.Allocate(att(3), []netip.Prefix{v6, small})
	var full *RangeFullError
	if !errors.As(err, &full) || full.Range != small || full.InUse != 2 {
		t.Fatalf("third allocation: %v, want the /30 named full with 2 in use", err)
	}
	if got := err.Error(); got != "pod CIDR 10.9.0.0/30 has no free address (2 in use)" {
		t.Errorf("message %q", got)
	}
	if held, _ := s.Get(att(3)); held != nil {
		t.Fatalf("a failed allocation kept %v", held)
	}
	all, _ := s.List()
	if len(all) != 2 {
		t.Fatalf("allocations after exhaustion: %v", all)
	}
	// Released, the address comes back.
	freed, err := s.Release(att(1))
	if err != nil || len(freed) != 2 {
		t.Fatalf("Release: %v %v", freed, err)
	}
	got, err := s.Allocate(att(3), []netip.Prefix{v6, small})
	if err != nil || got[1] != netip.MustParseAddr("10.9.0.1") {
		t.Fatalf("after release: %v %v", got, err)
	}
}

func TestReleasedAddressIsNotReusedAtOnce(t *testing.T) {
	s, _ := Open(t.TempDir())
	a, _ := s.Allocate(att(1), []netip.Prefix{v4})
	if _, err := s.Release(att(1)); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Allocate(att(2), []netip.Prefix{v4})
	if a[0] == b[0] {
		t.Fatalf("%v reused at once", a[0])
	}
}

func TestReleaseIsIdempotent(t *testing.T) {
	s, _ := Open(t.TempDir())
	if freed, err := s.Release(att(9)); err != nil || freed != nil {
		t.Fatalf("release of nothing: %v %v", freed, err)
	}
}

func TestTooSmallRange(t *testing.T) {
	s, _ := Open(t.TempDir())
	if _, err := s.Allocate(att(1), []netip.Prefix{netip.MustParsePrefix("10.1.1.1/32")}); err == nil {
		t.Fatal("a /32 pod CIDR was accepted")
	}
}

func TestGCReleasesAllButValid(t *testing.T) {
	s, _ := Open(t.TempDir())
	for i := 1; i <= 4; i++ {
		if _, err := s.Allocate(att(i), []netip.Prefix{v4}); err != nil {
			t.Fatal(err)
		}
	}
	released, err := s.GC([]Attachment{att(2), att(4)})
	if err != nil {
		t.Fatal(err)
	}
	if len(released) != 2 || released[0].Attachment != att(1) || released[1].Attachment != att(3) {
		t.Fatalf("released %v", released)
	}
	all, _ := s.List()
	if len(all) != 2 || all[0].Attachment != att(2) || all[1].Attachment != att(4) {
		t.Fatalf("kept %v", all)
	}
}

func TestDamagedStateFailsClosed(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir)
	if _, err := s.Allocate(att(1), []netip.Prefix{v4}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("{\"allocations\": [tru"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allocate(att(2), []netip.Prefix{v4}); err == nil {
		t.Fatal("allocated over a damaged state file (could hand out an address a pod holds)")
	}
}

// TestConcurrentAllocations: goroutines of this process and other
// processes allocate from one store at once; every address is handed out
// once.
func TestConcurrentAllocations(t *testing.T) {
	dir := t.TempDir()
	if os.Getenv("IPAM_CHILD_DIR") != "" {
		t.Skip("run by the parent test")
	}
	const procs, perProc, goroutines = 3, 20, 4
	var wg sync.WaitGroup
	errs := make(chan error, procs+goroutines)
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAllocate$", "-test.count=1")
			cmd.Env = append(os.Environ(), "IPAM_CHILD_DIR="+dir, "IPAM_CHILD_ID=p"+strconv.Itoa(p), "IPAM_CHILD_N="+strconv.Itoa(perProc))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("child %d: %v\n%s", p, err, out)
			}
		}()
	}
	s, _ := Open(dir)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perProc; i++ {
				if _, err := s.Allocate(Attachment{fmt.Sprintf("g%d-%d", g, i), "eth0"}, []netip.Prefix{v4, v6}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if want := (procs + goroutines) * perProc; len(all) != want {
		t.Fatalf("%d allocations, want %d", len(all), want)
	}
	seen := map[netip.Addr]Attachment{}
	for _, al := range all {
		for _, a := range al.Addrs {
			if prev, dup := seen[a]; dup {
				t.Fatalf("%v handed to %v and %v", a, prev, al.Attachment)
			}
			seen[a] = al.Attachment
		}
	}
}

// TestHelperAllocate is the child process of TestConcurrentAllocations.
func TestHelperAllocate(t *testing.T) {
	dir := os.Getenv("IPAM_CHILD_DIR")
	if dir == "" {
		t.Skip("child of TestConcurrentAllocations only")
	}
	n, _ := strconv.Atoi(os.Getenv("IPAM_CHILD_N"))
	s, _ := Open(dir)
	for i := 0; i < n; i++ {
		if _, err := s.Allocate(Attachment{fmt.Sprintf("%s-%d", os.Getenv("IPAM_CHILD_ID"), i), "eth0"}, []netip.Prefix{v4, v6}); err != nil {
			t.Fatal(err)
		}
	}
}
