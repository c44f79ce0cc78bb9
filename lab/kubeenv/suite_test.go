package kubeenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// e2eDir is hack/build-e2e.sh's directory, which make test sets; without
// it the test cannot run (and must, in CI).
func e2eDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("NETCUBE_E2E_DIR")
	if dir == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("NETCUBE_E2E_DIR unset: make test sets it to hack/build-e2e.sh's directory")
		}
		t.Skip("NETCUBE_E2E_DIR unset: no e2e.test to start (make test sets it)")
	}
	return dir
}

// dryRunArgs start the suite as ginkgo does, building its whole tree, but
// run nothing: the shortest start that makes the suite's directory.
var dryRunArgs = []string{"--ginkgo.dry-run", "--ginkgo.focus", "no test has this name", "--provider", "skeleton"}

func leftIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSuiteCommandLeavesNothingBehind(t *testing.T) {
	dir := e2eDir(t)
	suite := filepath.Join(dir, "e2e.test")

	// Positive control: e2e.test started as it is leaves a directory in
	// its TMPDIR.
	plain := t.TempDir()
	cmd := exec.Command(suite, dryRunArgs...)
	cmd.Env = append(os.Environ(), "TMPDIR="+plain)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e.test %v: %v\n%s", dryRunArgs, err, out)
	}
	if len(leftIn(t, plain)) == 0 {
		t.Fatal("e2e.test left nothing in its TMPDIR: the leak SuiteCommand works around is gone or moved (test/e2e/kubectl/kuberc.go); this test no longer shows it works")
	}

	// Started by SuiteCommand, it leaves nothing in the TMPDIR of the
	// process that starts it.
	parent := t.TempDir()
	t.Setenv("TMPDIR", parent)
	cmd, done, err := SuiteCommand(suite, dryRunArgs...)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("e2e.test %v: %v\n%s", dryRunArgs, err, out)
	}
	if len(leftIn(t, parent)) != 1 {
		t.Errorf("before done, %s holds %v: want SuiteCommand's own directory only", parent, leftIn(t, parent))
	}
	done()
	if left := leftIn(t, parent); len(left) != 0 {
		t.Errorf("after done, %s still holds %v", parent, left)
	}

	// SuiteImages starts e2e.test without a TMPDIR of its own: it lists
	// the images and leaves nothing behind.
	images, err := SuiteImages(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(images) == 0 {
		t.Error("e2e.test --list-images named no image")
	}
	if left := leftIn(t, parent); len(left) != 0 {
		t.Errorf("after SuiteImages, %s holds %v: --list-images leaks now, so it needs SuiteCommand too", parent, left)
	}
}
