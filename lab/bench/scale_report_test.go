package bench

import (
	"strings"
	"testing"
	"time"
)

// TestMergedLatency: the agents' histograms, merged, give the quantiles
// and the highest bucket reached of the observations between two scrapes
// only (what was there before the stream does not count).
func TestMergedLatency(t *testing.T) {
	before := histogram{0.001: 5, 0.01: 5, 0.1: 5, 1: 5, 1e9: 5}
	after := histogram{0.001: 5, 0.01: 95, 0.1: 104, 1: 105, 1e9: 105} // +90 in (1, 10] ms, +9 to 100 ms, +1 to 1 s
	if got := maxBucket(before, after); got != 1 {
		t.Errorf("max bucket %g, want 1 (the one observation past 100 ms)", got)
	}
	if p50 := histQuantile(before, after, 0.5); p50 <= 0.001 || p50 > 0.01 {
		t.Errorf("p50 %g, want within (1, 10] ms", p50)
	}
	if p99 := histQuantile(before, after, 0.99); p99 <= 0.01 || p99 > 0.1 {
		t.Errorf("p99 %g, want within (10, 100] ms", p99)
	}
	if got := maxBucket(before, before); got != 0.001 {
		t.Errorf("no observations: max bucket %g, want the lowest bound", got)
	}
}

// TestScaleMarkdownNamesItsRun: the report names the commit it measured
// and the command that reproduces it.
func TestScaleMarkdownNamesItsRun(t *testing.T) {
	cfg := ScaleConfig{Agents: []int{10, 50}, Services: 10000, Endpoints: 5, Pods: 1000, Policies: 100, Rate: 10,
		Duration: 30 * time.Second, PolicyEvery: time.Second}
	md := ScaleMarkdown(cfg, []ScaleResult{{Agents: 10, Changes: 300, Observed: 3000, LatencyP99MS: 12.5}}, time.Now())
	for _, want := range []string{"netcube commit " + Commit(), "--agents 10,50 --services 10000 --endpoints 5", "| 10 |", "/ 12.5 /"} {
		if !strings.Contains(md, want) {
			t.Errorf("report does not say %q", want)
		}
	}
}

// TestScaleMarkdownVariants: with several variants, each row names its
// variant, the method says what each asks of the API server, and the
// command reproduces the comparison; a failed point is listed apart,
// with the first line of its error.
func TestScaleMarkdownVariants(t *testing.T) {
	cfg := ScaleConfig{Agents: []int{100}, Services: 10000, Endpoints: 5, Pods: 1000, Policies: 100, Rate: 10,
		Duration: 30 * time.Second, PolicyEvery: time.Second, Variants: []string{"lists", "watch-list"}, Name: "scale-wire"}
	md := ScaleMarkdown(cfg, []ScaleResult{{Agents: 100, Variant: "lists", RestartListsServed: 1500}, {Agents: 100, Variant: "watch-list", RestartWatchesServed: 1400},
		{Agents: 200, Variant: "json", Error: "kube-apiserver not ready\nlog lines"}}, time.Now())
	if strings.Contains(md, "| 200 | json |") {
		t.Error("a failed point is in the tables")
	}
	for _, want := range []string{"**Failed points**", "- 200 agents, json: kube-apiserver not ready\n", "| agents | variant |", "| 100 | lists |", "| 100 | watch-list |", "`--api-watch-list`: one watch per resource",
		"| 1500 | 0 |", "| 0 | 1400 |", "--variants lists,watch-list --name scale-wire", "plots/scale-wire-latency.svg"} {
		if !strings.Contains(md, want) {
			t.Errorf("report does not say %q", want)
		}
	}
}
