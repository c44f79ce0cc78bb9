// Package testenv holds what the privileged tests share: the root check and
// helpers for names that cannot collide with a user's running sandbox.
package testenv

import (
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/datapath"
)

// SkipRootEnv, set to 1, lets a developer without root skip the tests that
// need it, on purpose. Without it (and always in CI) such a test fails:
// a run that tested nothing must not look green.
const SkipRootEnv = "NETCUBE_SKIP_ROOT_TESTS"

// RootMissing says why tests needing root cannot run here ("": they can, or
// they are skipped on purpose: skip is then true).
func RootMissing() (why string, skip bool) {
	if os.Geteuid() == 0 {
		return "", false
	}
	if os.Getenv(SkipRootEnv) == "1" && os.Getenv("CI") == "" {
		return "", true
	}
	return "this test needs root (BPF, network namespaces): run it as root (make test), or set " +
		SkipRootEnv + "=1 to skip such tests on purpose (never in CI)", false
}

// RequireRoot fails a test that needs root when run unprivileged, unless
// skipping was asked for (SkipRootEnv) outside CI.
func RequireRoot(t testing.TB) {
	t.Helper()
	why, skip := RootMissing()
	if skip {
		t.Skip("needs root (BPF, network namespaces); skipped: " + SkipRootEnv + "=1")
	}
	if why != "" {
		t.Fatal(why)
	}
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

// LogWriter is an io.Writer onto t.Log, a line at a time (progress of a
// long step shows in `go test -v`).
func LogWriter(t testing.TB) io.Writer { return logWriter{t} }

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// OnCPU runs the rest of the calling test's goroutine on one CPU, cpu,
// and returns what puts it back: BPF_PROG_RUN runs a program on the
// caller's CPU, and what a program leaves per CPU (a scratch map, an
// event's IRQ work) is seen only by the runs of that CPU. Call the
// returned function (defer it) before the test ends.
func OnCPU(t testing.TB, cpu int) (restore func()) {
	t.Helper()
	runtime.LockOSThread()
	var was, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	return func() {
		_ = unix.SchedSetaffinity(0, &was)
		runtime.UnlockOSThread()
	}
}
