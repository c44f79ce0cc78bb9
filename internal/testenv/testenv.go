// Package testenv holds what the privileged tests share: the root check and
// helpers for names that cannot collide with a user's running sandbox.
package testenv

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

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
// interfaces, cgroups and pins: the prefix, then the process id.
func Name(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, os.Getpid())
}

var testName = regexp.MustCompile(`^[a-z]([0-9]+)s?$`)

// StaleSandboxes lists the sandboxes (by name) that test processes which no
// longer exist left behind: a test killed outright cannot clean up, so the
// next run does.
func StaleSandboxes() []string {
	var stale []string
	entries, _ := os.ReadDir("/run/netns")
	seen := map[string]bool{}
	for _, e := range entries {
		name, _, ok := strings.Cut(e.Name(), "-")
		m := testName.FindStringSubmatch(name)
		if !ok || m == nil || seen[name] {
			continue
		}
		seen[name] = true
		pid, _ := strconv.Atoi(m[1])
		if pid != os.Getpid() && syscall.Kill(pid, 0) != nil {
			stale = append(stale, name)
		}
	}
	return stale
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
