package kubeenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SuiteCommand is exec.Command for a program that starts the upstream e2e
// suite (e2e.test itself, or ginkgo or nsenter running it), with a
// temporary directory of its own as TMPDIR; done removes that directory,
// once the command has ended. Why: every run of the suite, a dry run
// included, leaves directories behind in TMPDIR ("test-kuberc*":
// test/e2e/kubectl/kuberc.go makes them while ginkgo builds the suite's
// tree, and removes them with os.Remove, which fails because each holds a
// file). Set cmd.Env by appending to it: it already holds this process's
// environment and TMPDIR.
func SuiteCommand(name string, args ...string) (cmd *exec.Cmd, done func(), err error) {
	tmp, err := os.MkdirTemp("", "netcube-e2e-tmp-")
	if err != nil {
		return nil, nil, fmt.Errorf("the e2e suite's temporary directory: %w", err)
	}
	cmd = exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	return cmd, func() { _ = os.RemoveAll(tmp) }, nil
}

// SuiteImages is every image the e2e suite in e2eDir (hack/build-e2e.sh)
// runs, as `e2e.test --list-images` names them. It needs no SuiteCommand:
// --list-images answers before the suite's tree is built, so it leaves
// nothing in TMPDIR (TestSuiteCommandLeavesNothingBehind checks).
func SuiteImages(e2eDir string) ([]string, error) {
	out, err := exec.Command(filepath.Join(e2eDir, "e2e.test"), "--list-images").Output()
	if err != nil {
		return nil, fmt.Errorf("e2e.test --list-images: %w (hack/build-e2e.sh builds it)", err)
	}
	return strings.Fields(string(out)), nil
}
