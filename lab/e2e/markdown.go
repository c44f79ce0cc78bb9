package e2e

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// Explanation says why a test fails here: a missing netcube feature (with
// its issue) or a limit of the sandbox.
type Explanation struct {
	Pattern string // a regular expression on the test's name
	Why     string
}

// Meta is what the report says about the run.
type Meta struct {
	Commit       string        // netcube's commit
	Command      string        // what produced the report
	Kubernetes   string        // the suite's version
	Environment  string        // nodes, runtime, kernel
	Explanations []Explanation `json:"-"` // today's, not the run's
}

// WriteMarkdown writes the conformance report: the pass rate over the
// tests that ran, over every test this machine can run and over
// everything selected (a skip hides nothing from the last), the skips by
// category, the tests that skipped themselves, failures explained, and
// every test.
func WriteMarkdown(w io.Writer, r *Report, m Meta) error {
	sum := r.Summarize()
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# Upstream sig-network e2e tests against netcube\n\n")
	p("The `[sig-network]` tests of Kubernetes' own end-to-end suite (`e2e.test` %s, built from `k8s.io/kubernetes/test/e2e`), "+
		"run against a sandbox with real nodes: %s. Measured at netcube commit `%s` by `%s`, started %s, wall time %s.\n\n",
		m.Kubernetes, m.Environment, m.Commit, m.Command, r.Start.UTC().Format(time.RFC3339), r.Wall.Round(time.Second))
	skipped := 0
	for _, c := range Categories {
		skipped += sum.Skipped[c]
	}
	p("## Summary\n\n%d tests selected: %d passed, %d failed, %d skipped by the run (below, by category), %d skipped themselves at run time.\n\n",
		sum.Selected, sum.Passed, sum.Failed, skipped, sum.SelfSkipped)
	p("| pass rate | passed | of | rate |\n|---|---:|---:|---:|\n")
	p("| of the tests that ran | %d | %d | %.1f%% |\n", sum.Passed, sum.Ran(), 100*sum.Rate(sum.Ran()))
	p("| of every test this machine can run (all selected but those that %s) | %d | %d | %.1f%% |\n",
		MachineLimit, sum.Passed, sum.Runnable(), 100*sum.Rate(sum.Runnable()))
	p("| **of everything selected** | **%d** | **%d** | **%.1f%%** |\n\n", sum.Passed, sum.Selected, 100*sum.Rate(sum.Selected))

	p("## Not run here, and why\n\nThe run skips only the tests below, each group for the one reason that applies to every test in it ")
	p("(`lab/e2e`'s tests check each pattern catches exactly the tests its reason names).\n\n")
	for _, c := range Categories {
		p("### %s%s: %d skipped\n\n", strings.ToUpper(string(c[:1])), c[1:], sum.Skipped[c])
		n := 0
		for _, s := range Skips {
			if s.Category != c {
				continue
			}
			if n == 0 {
				p("| tests matching | skipped | reason |\n|---|---:|---|\n")
			}
			n++
			p("| `%s` | %d | %s |\n", strings.ReplaceAll(s.Pattern, "|", `\|`), r.skippedBy(s), s.Reason)
		}
		if n == 0 {
			p("None.\n")
		}
		p("\n")
	}
	p("### Skipped by the tests themselves: %d skipped\n\n", sum.SelfSkipped)
	p("A test that finds the cluster lacks what it needs skips itself; these count as selected and not passed.\n\n")
	if sum.SelfSkipped == 0 {
		p("None.\n\n")
	} else {
		p("| test | its reason |\n|---|---|\n")
		for _, s := range r.Specs {
			if _, ok := SkippedBy(s.Name); !ok && (s.State == "skipped" || s.State == "pending") {
				p("| %s | %s |\n", cell(s.Name), cell(s.Failure))
			}
		}
		p("\n")
	}

	failed := r.Failed()
	p("## Failures explained\n\n")
	if len(failed) == 0 {
		p("None.\n\n")
	} else {
		p("| test | why |\n|---|---|\n")
		for _, s := range failed {
			p("| %s | %s |\n", cell(s.Name), cell(explain(s.Name, m.Explanations)))
		}
		p("\n")
	}
	p("## Every test\n\n| test | result | time | note |\n|---|---|---:|---|\n")
	for _, s := range r.Specs {
		note := ""
		if s.State != "passed" {
			note = s.Failure
		}
		t := ""
		if s.RunTime > 0 {
			t = fmt.Sprintf("%.1f s", s.RunTime.Seconds())
		}
		p("| %s | %s | %s | %s |\n", cell(s.Name), s.State, t, cell(note))
	}
	return nil
}

// skippedBy counts the report's skipped tests that skip catches.
func (r *Report) skippedBy(skip Skip) int {
	n := 0
	re := regexp.MustCompile(skip.Pattern)
	for _, s := range r.Specs {
		if (s.State == "skipped" || s.State == "pending") && re.MatchString(s.Name) {
			n++
		}
	}
	return n
}

// explain finds a failure's explanation; a failure nobody explained says so.
func explain(name string, ex []Explanation) string {
	for _, e := range ex {
		if regexp.MustCompile(e.Pattern).MatchString(name) {
			return e.Why
		}
	}
	return "**not yet explained**"
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
