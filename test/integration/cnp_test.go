package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/cnp"
	"github.com/netcube/netcube/lab/sandbox"
)

// checkClusterNetworkPolicy runs the fast subset of the upstream
// ClusterNetworkPolicy conformance suite (cnp.Smoke: Admin-tier accept,
// deny and pass, Baseline-tier accept and deny, the tiers around
// NetworkPolicy) on the real nodes, as `netcube-lab cnp --smoke` does: the
// suite's own pods, policies and probes. Every test must run and pass,
// every subtest of it: where the agent does not enforce
// ClusterNetworkPolicy, the denials connect and this fails.
func checkClusterNetworkPolicy(t *testing.T, sb *sandbox.Sandbox) {
	results := filepath.Join(t.TempDir(), "cnp.json")
	cmd := exec.Command(filepath.Join(binDir, sandbox.LabBinary), "cnp", "--reuse", "--name", sb.Config.Name, "--smoke", "--json", results)
	cmd.Stdout, cmd.Stderr = testenv.LogWriter(t), testenv.LogWriter(t)
	runErr := cmd.Run()
	rep, err := cnp.LoadJSON(results)
	if err != nil {
		t.Fatalf("netcube-lab cnp: %v; no results: %v", runErr, err)
	}
	if len(rep.Setup) > 0 {
		t.Fatalf("the suite's setup failed:\n%s", strings.Join(rep.Setup, "\n"))
	}
	ran := map[string]*cnp.Test{}
	for _, tt := range rep.Tests {
		ran[tt.Name] = tt
	}
	for _, name := range cnp.Smoke {
		tt, ok := ran[name]
		if !ok {
			t.Errorf("%s did not run", name)
			continue
		}
		if len(tt.Subtests) == 0 {
			t.Errorf("%s ran no subtests", name)
		}
		for _, s := range append([]*cnp.Test{tt}, tt.Subtests...) {
			if s.Result != cnp.Passed {
				t.Errorf("%s / %s: %s %s\n%s", name, cnp.Display(s.Name), s.Result, s.Reason, strings.Join(s.Failure, "\n"))
			}
		}
	}
	if len(rep.Tests) != len(cnp.Smoke) {
		t.Errorf("%d tests ran, want %d", len(rep.Tests), len(cnp.Smoke))
	}
	tests, subs := rep.Totals()
	t.Logf("ClusterNetworkPolicy subset: %d of %d tests passed (%d of %d subtests) in %s; netcube-lab cnp: %v",
		tests.Passed, tests.Total(), subs.Passed, subs.Total(), rep.Wall.Round(time.Second), runErr)
}
