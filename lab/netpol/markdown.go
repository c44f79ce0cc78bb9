package netpol

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// WriteMarkdown renders the conformance summary: totals, cases per
// feature (cyclonus's tags), the failures with their probe tables, and
// what did not run, with why.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	t := r.Totals()
	fmt.Fprintf(&b, "# NetworkPolicy: cyclonus's generated cases on real nodes\n\n")
	fmt.Fprintf(&b, "Measured at commit `%s` on %s, by `%s`.\n\n", r.Meta.Commit, r.Meta.Date, r.Meta.Command)
	fmt.Fprintf(&b, "%s\n\n", r.Meta.Environment)
	fmt.Fprintf(&b, "Each case's policies, label changes and pod or namespace churn are applied through the API server; after each step, "+
		"every pod connects to every pod (9 x 9, self excluded) on each port and protocol the step probes, from inside the pod "+
		"(kubelet exec of cyclonus's worker, which runs `agnhost connect`), and each answer is compared with cyclonus's matcher, "+
		"an independent model of the API. A step that differs is probed again (up to the run's retries); a case passes when its last "+
		"probe of every step agrees, probe for probe.\n\n")
	fmt.Fprintf(&b, "**%d of %d cases passed (%.1f%%)**, %d failed; %d of cyclonus's %d generated cases did not run (below). Wall time %s.\n\n",
		t.Passed, t.Passed+t.Failed, pct(t.Passed, t.Passed+t.Failed), t.Failed, len(r.NotRun), r.Generated, r.Wall.Round(time.Second))

	primary, sub := r.ByTag()
	b.WriteString("## Per feature\n\n| Feature | Passed | Failed |\n|---|---:|---:|\n")
	for _, p := range slices.Sorted(maps.Keys(primary)) {
		fmt.Fprintf(&b, "| **%s** | %d | %d |\n", p, primary[p].Passed, primary[p].Failed)
		for _, s := range slices.Sorted(maps.Keys(sub[p])) {
			fmt.Fprintf(&b, "| &nbsp;&nbsp;%s | %d | %d |\n", s, sub[p][s].Passed, sub[p][s].Failed)
		}
	}

	var agree, differ int
	for _, c := range r.Cases {
		for _, p := range c.Probes {
			agree, differ = agree+p.Agree, differ+p.Differ
		}
	}
	fmt.Fprintf(&b, "\nProbes (the last try of every step): %d agreed with the matcher, %d differed.\n", agree, differ)

	b.WriteString("\n## Failures\n\n")
	failed := 0
	for _, c := range r.Cases {
		if c.Passed {
			continue
		}
		failed++
		fmt.Fprintf(&b, "### %s\n\n", c.Description)
		if c.Err != "" {
			fmt.Fprintf(&b, "Could not run: %s\n\n", c.Err)
		}
		if c.Failure != "" {
			fmt.Fprintf(&b, "```\n%s```\n\n", c.Failure)
		}
	}
	if failed == 0 {
		b.WriteString("None.\n")
	}

	b.WriteString("\n## Not run here\n\n")
	if len(r.NotRun) == 0 {
		b.WriteString("None.\n")
	}
	byTag := map[string][]string{}
	for _, n := range r.NotRun {
		byTag[n.Tag] = append(byTag[n.Tag], n.Description)
	}
	for _, tag := range slices.Sorted(maps.Keys(byTag)) {
		fmt.Fprintf(&b, "- **%d cases tagged `%s`**: %s.\n", len(byTag[tag]), tag, NotRunTags[tag])
	}

	b.WriteString("\n## Cases\n\n| # | Case | Result | Steps | Probe rounds | Seconds |\n|---:|---|---|---:|---:|---:|\n")
	for i, c := range r.Cases {
		res := "passed"
		if !c.Passed {
			res = "**failed**"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %d | %.1f |\n", i+1, strings.ReplaceAll(c.Description, "|", "\\|"), res, c.Steps, c.Tries, c.Seconds)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(a, n int) float64 {
	if n == 0 {
		return 0
	}
	return 100 * float64(a) / float64(n)
}
