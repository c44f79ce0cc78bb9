package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
)

// TestNonRootRunFailsLoudly: run as an unprivileged user, a package of
// root-only tests fails (it used to pass having tested nothing), with a
// message saying why; skipping needs asking for, and never in CI.
func TestNonRootRunFailsLoudly(t *testing.T) {
	testenv.RequireRoot(t) // to switch to another user
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []struct{ path, run string }{
		{"github.com/netcube/netcube/test/controlplane", "TestAgentFollowsTheAPI"},
		{"github.com/netcube/netcube/pkg/datapath", "TestPacketFlows"},
	} {
		t.Run(filepath.Base(pkg.path), func(t *testing.T) {
			bin := filepath.Join(dir, filepath.Base(pkg.path)+".test")
			if out, err := exec.Command("go", "test", "-c", "-o", bin, pkg.path).CombinedOutput(); err != nil {
				t.Fatalf("build: %v\n%s", err, out)
			}
			asNobody := func(env ...string) (string, error) {
				cmd := exec.Command("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", bin, "-test.run", "^"+pkg.run+"$", "-test.count=1")
				cmd.Dir = dir
				cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}, env...)
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			out, err := asNobody()
			if err == nil || !strings.Contains(out, "needs root") {
				t.Errorf("as nobody: %v, want a failure saying it needs root:\n%s", err, out)
			}
			out, err = asNobody(testenv.SkipRootEnv + "=1")
			if err != nil {
				t.Errorf("as nobody with %s=1: %v, want the root tests skipped:\n%s", testenv.SkipRootEnv, err, out)
			}
			out, err = asNobody(testenv.SkipRootEnv+"=1", "CI=true")
			if err == nil {
				t.Errorf("as nobody in CI with %s=1: passed, want a failure:\n%s", testenv.SkipRootEnv, out)
			}
		})
	}
}
