// Package testenv holds what the privileged tests share: the root check and
// helpers for names that cannot collide with a user's running sandbox.
package testenv

import (
	"fmt"

	"github.com/netcube/netcube/pkg/datapath"
	"os"
	"testing"
	"time"
)

// RequireRoot skips a test that needs root (BPF, namespaces) when run
// unprivileged on a laptop, but fails it in CI, where skipping would hide
// that nothing was tested.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("this test needs root, and CI runs as root: refusing to skip")
	}
	t.Skip("needs root (BPF, network namespaces)")
}

// Name returns a short name unique to this test process, for namespaces,
// interfaces, cgroups and pins.
func Name(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, os.Getpid()%100000)
}

// EnsureBPFFS mounts bpffs at /sys/fs/bpf if it is not mounted yet.
func EnsureBPFFS(t testing.TB) {
	t.Helper()
	if err := datapath.EnsureBPFFS(); err != nil {
		t.Fatal(err)
	}
}

// WaitFor polls cond until it holds, failing the test after timeout; it
// returns how long it took.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < timeout {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s", what, timeout)
	return 0
}
