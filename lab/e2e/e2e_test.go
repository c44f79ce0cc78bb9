package e2e

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestReport: ginkgo's JSON report becomes the sig-network tests the
// focus selected (other SIGs' and unselected tests out); each skipped test
// counts under its skip's category, or as skipped by itself (with its own
// message); the summary gives the pass rate over the tests that ran, over
// those the machine can run (the "cannot run on this machine" skips out)
// and over everything selected; failures come with their first line and
// explanation.
func TestReport(t *testing.T) {
	r, err := ReadReport("testdata/ginkgo.json", regexp.MustCompile(Focus))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Specs) != 7 {
		t.Fatalf("%d tests, want the 7 sig-network ones: %+v", len(r.Specs), r.Specs)
	}
	sum := r.Summarize()
	want := Summary{Selected: 7, Passed: 2, Failed: 2, SelfSkipped: 1, Skipped: map[Category]int{MachineLimit: 1, NotDataPlane: 1}}
	if sum.Selected != want.Selected || sum.Passed != want.Passed || sum.Failed != want.Failed || sum.SelfSkipped != want.SelfSkipped ||
		len(sum.Skipped) != 2 || sum.Skipped[MachineLimit] != 1 || sum.Skipped[NotDataPlane] != 1 {
		t.Errorf("summary %+v, want %+v", sum, want)
	}
	if sum.Ran() != 4 || sum.Runnable() != 6 {
		t.Errorf("ran %d, runnable %d; want 4 and 6 (all selected but the SCTP one)", sum.Ran(), sum.Runnable())
	}
	failed := r.Failed()
	if len(failed) != 2 || failed[1].Failure != "Unable to reach service through proxy: context deadline exceeded" {
		t.Fatalf("failures: %+v", failed)
	}

	var b bytes.Buffer
	err = WriteMarkdown(&b, r, Meta{Commit: "abc1234", Command: "netcube-lab e2e", Kubernetes: "v1.36.3", Environment: "3 nodes",
		Explanations: []Explanation{{Pattern: `Proxy version v1`, Why: "explained here"}}})
	if err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"7 tests selected: 2 passed, 2 failed, 2 skipped by the run (below, by category), 1 skipped themselves at run time.",
		"| of the tests that ran | 2 | 4 | 50.0% |",
		"| of every test this machine can run (all selected but those that cannot run on this machine) | 2 | 6 | 33.3% |",
		"| **of everything selected** | **2** | **7** | **28.6%** |",
		"### Cannot run on this machine: 1 skipped\n",
		"| `\\[Feature:SCTPConnectivity\\]` | 1 | SCTP between pods",
		"### Not a data-plane test: 1 skipped\n",
		"| `\\[Feature:PerformanceDNS\\]\\|\\[Feature:Networking-Performance\\]` | 1 | benchmarks",
		"### Netcube does not support it: 0 skipped\n\nNone.\n",
		"### Skipped by the tests themselves: 1 skipped\n",
		"| [sig-network] Traffic Distribution should route traffic correctly between pods on multiple nodes when using PreferClose | need at least 3 zones, with at least 2 schedulable nodes each |",
		"| [sig-network] Proxy version v1 should proxy through a service and a pod [Conformance] | explained here |",
		"NetworkPolicy between server and client should enforce policy to allow traffic only from a different namespace [Feature:NetworkPolicy] | **not yet explained** |",
		"`abc1234`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestProgress: every "•" is a finished test (a passed one's mark ends no
// line); a failed one's name follows its mark.
func TestProgress(t *testing.T) {
	in := "[123] Kubernetes e2e suite - 13/7579 specs - 6 procs •••\n" +
		"• [FAILED] [132.265 seconds]\n[sig-network] Proxy version v1 [It] should proxy [Conformance]\n" +
		"  [sig-network] a timeline line\n••\n"
	var log, out bytes.Buffer
	progress(strings.NewReader(in), &log, &out)
	if log.String() != in {
		t.Errorf("log is not the output")
	}
	got := out.String()
	if !strings.Contains(got, "e2e: 6 tests done, 1 failed") ||
		strings.Count(got, "FAILED") != 1 || !strings.Contains(got, "FAILED [sig-network] Proxy version v1") {
		t.Errorf("progress:\n%s", got)
	}
}
