package cnp

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSaysTheClusterIsUnreachable: the real suite (built by
// hack/build-cnp-conformance.sh, or from its cache), run through
// go tool test2json against a kubeconfig that names no cluster, gives a
// report that fails with the suite's own words in its setup, not one
// that passes on no tests; its log and events are where Run says.
func TestRunSaysTheClusterIsUnreachable(t *testing.T) {
	suite, err := SuiteDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// No ~/.kube/config of this machine's to fall back to; go's own
	// directories stay (go tool test2json is built into its cache).
	for _, v := range []string{"GOCACHE", "GOPATH", "GOMODCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(v, strings.TrimSpace(string(out)))
	}
	t.Setenv("HOME", dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	rep, err := Run(Options{Suite: suite, Kubeconfig: kubeconfig, Tests: Smoke, Dir: dir, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed() || len(rep.Tests) != 0 || !strings.Contains(strings.Join(rep.Setup, "\n"), "Error loading Kubernetes config") {
		t.Errorf("report: tests %v, setup %q; log:\n%s", rep.Tests, rep.Setup, log.String())
	}
	if !strings.Contains(log.String(), "-test.run '^TestConformance$/^(CNPAdminTierEgressTCP|") {
		t.Errorf("the progress does not say what runs:\n%s", log.String())
	}
	for _, f := range []string{"cnp.log", "cnp.jsonl"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || len(b) == 0 {
			t.Errorf("%s: %v (%d bytes)", f, err, len(b))
		}
	}
}
