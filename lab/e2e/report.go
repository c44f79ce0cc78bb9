package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Spec is one test's result.
type Spec struct {
	Name    string        // the full name, as the suite prints it
	State   string        // passed, failed, skipped, pending, panicked, timedout, interrupted, aborted
	RunTime time.Duration // 0 when skipped
	Failure string        // the first line of the failure message
}

// Report is a run's results.
type Report struct {
	Meta  Meta
	Specs []Spec
	Start time.Time
	Wall  time.Duration
}

// ginkgoReport is the part of ginkgo's JSON report (types.Report) read here.
type ginkgoReport struct {
	StartTime   time.Time
	RunTime     time.Duration
	SpecReports []struct {
		ContainerHierarchyTexts []string
		LeafNodeText            string
		LeafNodeType            string
		State                   string
		RunTime                 time.Duration
		Failure                 struct{ Message string }
	}
}

// ReadReport parses ginkgo's JSON report (one suite), keeping the
// sig-network tests (It nodes) whose names match selected (the run's focus: ginkgo reports
// every test of the suite), and the suite's setup nodes that failed.
func ReadReport(file string, selected *regexp.Regexp) (*Report, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var suites []ginkgoReport
	if err := json.Unmarshal(b, &suites); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(suites) != 1 {
		return nil, fmt.Errorf("%s: %d suites, want 1", file, len(suites))
	}
	g := suites[0]
	r := &Report{Start: g.StartTime, Wall: g.RunTime}
	for _, s := range g.SpecReports {
		if s.LeafNodeType != "It" {
			if s.State != "passed" && s.State != "skipped" { // a failed suite setup fails every test: say so
				r.Specs = append(r.Specs, Spec{Name: "suite " + s.LeafNodeType, State: s.State, Failure: firstLine(s.Failure.Message)})
			}
			continue
		}
		name := strings.TrimSpace(strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " "))
		if !strings.HasPrefix(name, "[sig-network]") || !selected.MatchString(name) {
			continue
		}
		r.Specs = append(r.Specs, Spec{Name: name, State: s.State, RunTime: s.RunTime, Failure: firstLine(s.Failure.Message)})
	}
	sort.Slice(r.Specs, func(i, j int) bool { return r.Specs[i].Name < r.Specs[j].Name })
	return r, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 240 {
		s = s[:240] + "…"
	}
	return s
}

// Counts of a set of tests.
type Counts struct{ Passed, Failed, Skipped int }

// Ran is how many ran (passed or failed).
func (c Counts) Ran() int { return c.Passed + c.Failed }

// PassRate is the share of the tests that ran which passed.
func (c Counts) PassRate() float64 {
	if c.Ran() == 0 {
		return 0
	}
	return float64(c.Passed) / float64(c.Ran())
}

// Count counts the tests for which keep is true.
func (r *Report) Count(keep func(Spec) bool) Counts {
	var c Counts
	for _, s := range r.Specs {
		if !keep(s) {
			continue
		}
		switch s.State {
		case "passed":
			c.Passed++
		case "skipped", "pending":
			c.Skipped++
		default:
			c.Failed++
		}
	}
	return c
}

// Summary is a run's outcome over everything it selected.
type Summary struct {
	Selected, Passed, Failed int
	Skipped                  map[Category]int // by Skips' patterns, per category
	SelfSkipped              int              // by the tests themselves at run time
}

// Summarize counts the report's tests, each skipped one under the
// category of the Skip whose pattern catches it (none: it skipped itself).
func (r *Report) Summarize() Summary {
	sum := Summary{Skipped: map[Category]int{}}
	for _, s := range r.Specs {
		sum.Selected++
		switch s.State {
		case "passed":
			sum.Passed++
		case "skipped", "pending":
			if skip, ok := SkippedBy(s.Name); ok {
				sum.Skipped[skip.Category]++
			} else {
				sum.SelfSkipped++
			}
		default:
			sum.Failed++
		}
	}
	return sum
}

// Ran is how many tests ran (passed or failed).
func (s Summary) Ran() int { return s.Passed + s.Failed }

// Runnable is how many tests this machine can run: all it selected but
// those that need what it lacks (MachineLimit).
func (s Summary) Runnable() int { return s.Selected - s.Skipped[MachineLimit] }

// Rate is the share of n that passed.
func (s Summary) Rate(n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(s.Passed) / float64(n)
}

// Failed lists the tests that did not pass or skip.
func (r *Report) Failed() []Spec {
	var out []Spec
	for _, s := range r.Specs {
		if s.State != "passed" && s.State != "skipped" && s.State != "pending" {
			out = append(out, s)
		}
	}
	return out
}

// WriteJSON writes the report (the committed record a report is
// re-rendered from: docs/conformance/sig-network.json).
func (r *Report) WriteJSON(file string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}

// LoadJSON reads a report WriteJSON wrote.
func LoadJSON(file string) (*Report, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &r, nil
}
