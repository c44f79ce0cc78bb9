package e2e

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestReport: ginkgo's JSON report becomes the sig-network tests the
// focus selected (other SIGs' and unselected tests out), NetworkPolicy
// counted apart, failures with their first line and explanation.
func TestReport(t *testing.T) {
	r, err := ReadReport("testdata/ginkgo.json", regexp.MustCompile(Focus))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Specs) != 4 {
		t.Fatalf("%d tests, want the 4 sig-network ones: %+v", len(r.Specs), r.Specs)
	}
	rest := r.Count(func(s Spec) bool { return !IsNetworkPolicy(s.Name) })
	np := r.Count(func(s Spec) bool { return IsNetworkPolicy(s.Name) })
	if rest != (Counts{Passed: 1, Failed: 1, Skipped: 1}) || np != (Counts{Failed: 1}) {
		t.Errorf("counts %+v and NetworkPolicy %+v", rest, np)
	}
	if got := rest.PassRate(); got != 0.5 {
		t.Errorf("pass rate %v, want 0.5 (of the tests that ran)", got)
	}
	failed := r.Failed()
	if len(failed) != 2 || failed[1].Failure != "Unable to reach service through proxy: context deadline exceeded" {
		t.Fatalf("failures: %+v", failed)
	}

	var b bytes.Buffer
	err = WriteMarkdown(&b, r, Meta{Commit: "abc1234", Command: "netcube-lab e2e", Kubernetes: "v1.36.3", Environment: "2 nodes",
		Explanations: []Explanation{{Pattern: `Proxy version v1`, Why: "explained here"}}})
	if err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| all but NetworkPolicy | 1 | 1 | 1 | 50.0% |",
		"| [sig-network] Proxy version v1 should proxy through a service and a pod [Conformance] | explained here |",
		"NetworkPolicy between server and client should enforce policy to allow traffic only from a different namespace [Feature:NetworkPolicy] | **not yet explained** |",
		"`abc1234`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

// TestSmokeAndSkipsAreValidPatterns: the focus and skip expressions
// compile, and the smoke focus selects each smoke test by its name.
func TestSmokeAndSkipsAreValidPatterns(t *testing.T) {
	smoke := regexp.MustCompile(SmokeFocus())
	skip := regexp.MustCompile(SkipPattern())
	for _, s := range Smoke {
		if !smoke.MatchString("[sig-network] " + s + " [Conformance]") {
			t.Errorf("smoke focus misses %q", s)
		}
		if skip.MatchString("[sig-network] " + s) {
			t.Errorf("smoke test %q is skipped", s)
		}
	}
	if !skip.MatchString("[sig-network] LoadBalancers should be able to change the type and ports of a TCP service [Slow]") {
		t.Error("LoadBalancer provisioning tests are not skipped")
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
