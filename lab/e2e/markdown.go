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

// WriteMarkdown writes the conformance report.
func WriteMarkdown(w io.Writer, r *Report, m Meta) error {
	isNP := func(s Spec) bool { return IsNetworkPolicy(s.Name) }
	notNP := func(s Spec) bool { return !IsNetworkPolicy(s.Name) }
	all := r.Count(func(Spec) bool { return true })
	rest, np := r.Count(notNP), r.Count(isNP)
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# Upstream sig-network e2e tests against netcube\n\n")
	p("The `[sig-network]` tests of Kubernetes' own end-to-end suite (`e2e.test` %s, built from `k8s.io/kubernetes/test/e2e`), "+
		"run against a sandbox with real nodes: %s. Measured at netcube commit `%s` by `%s`, started %s, wall time %s.\n\n",
		m.Kubernetes, m.Environment, m.Commit, m.Command, r.Start.UTC().Format(time.RFC3339), r.Wall.Round(time.Second))
	p("## Summary\n\n| tests | passed | failed | skipped | pass rate of those run |\n|---|---:|---:|---:|---:|\n")
	p("| all but NetworkPolicy | %d | %d | %d | %.1f%% |\n", rest.Passed, rest.Failed, rest.Skipped, 100*rest.PassRate())
	p("| NetworkPolicy (judged in the NetworkPolicy issue) | %d | %d | %d | %.1f%% |\n", np.Passed, np.Failed, np.Skipped, 100*np.PassRate())
	p("| **total** | **%d** | **%d** | **%d** | **%.1f%%** |\n\n", all.Passed, all.Failed, all.Skipped, 100*all.PassRate())

	p("## Not run here, and why\n\nOnly tests that need what a two-node sandbox without a cloud lacks are skipped by the run:\n\n| tests matching | reason |\n|---|---|\n")
	for _, s := range Skips {
		p("| `%s` | %s |\n", strings.ReplaceAll(s.Pattern, "|", `\|`), s.Reason)
	}
	p("\nTests may also skip themselves at run time (say, a feature the cluster lacks); the table below gives their reason.\n\n")

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
