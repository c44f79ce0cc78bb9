package netpol

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/generator"
)

// TestSmokeCoversEveryFeature: the subset `make test` runs exists among
// the cases that run here, exercises every primary tag they have, and
// every kind of change.
func TestSmokeCoversEveryFeature(t *testing.T) {
	all := generator.NewTestCaseGenerator(true, "192.0.2.1", []string{"x", "y", "z"}, nil, nil).GenerateTestCases()
	if len(all) < 200 {
		t.Fatalf("cyclonus generated %d cases; expected its full suite (about 230)", len(all))
	}
	var runnable []*generator.TestCase
	primaries := map[string]bool{}
	for _, c := range all {
		if notRunTag(c) != "" {
			continue
		}
		runnable = append(runnable, c)
		for p := range c.Tags.GroupTags() {
			primaries[p] = true
		}
	}
	smoke, err := Smoke(runnable)
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	steps := 0
	for _, c := range smoke {
		steps += len(c.Steps)
		for p, subs := range c.Tags.GroupTags() {
			covered[p] = true
			for _, s := range subs {
				covered[s] = true
			}
		}
	}
	for p := range primaries {
		if !covered[p] {
			t.Errorf("primary tag %q: no case of the subset has it", p)
		}
	}
	for _, action := range []string{generator.TagUpdatePolicy, generator.TagSetNamespaceLabels, generator.TagSetPodLabels,
		generator.TagCreatePod, generator.TagDeletePod} {
		if !covered[action] {
			t.Errorf("action %q: no case of the subset does it", action)
		}
	}
	t.Logf("%d generated, %d run here, %d in the subset (%d steps)", len(all), len(runnable), len(smoke), steps)
}

// TestReportCounts: totals and per-tag counts, and a failure shows its
// probe table in the Markdown.
func TestReportCounts(t *testing.T) {
	r := &Report{Generated: 4, Cases: []Case{
		{Description: "a", Passed: true, Tags: map[string][]string{"direction": {"ingress"}}},
		{Description: "b", Passed: false, Failure: "step 1: TABLE\n", Tags: map[string][]string{"direction": {"egress", "ingress"}}},
		{Description: "c", Passed: true, Tags: map[string][]string{"port": {"named-port"}}},
	}, NotRun: []NotRun{{Description: "d", Tag: generator.TagSCTPProtocol}}}
	if got := r.Totals(); got != (Counts{Passed: 2, Failed: 1}) {
		t.Errorf("totals %+v", got)
	}
	primary, sub := r.ByTag()
	if primary["direction"] != (Counts{1, 1}) || sub["direction"]["ingress"] != (Counts{1, 1}) || sub["direction"]["egress"] != (Counts{0, 1}) ||
		primary["port"] != (Counts{1, 0}) {
		t.Errorf("by tag %+v %+v", primary, sub)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**2 of 3 cases passed (66.7%)**", "### b", "TABLE", "1 cases tagged `sctp`", "| **direction** | 1 | 1 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
