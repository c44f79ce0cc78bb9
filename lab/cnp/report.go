package cnp

import (
	"encoding/json"
	"os"
	"time"
)

// Results of a test or subtest.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
	// NoSCTP: the test failed at a probe over SCTP, which this machine's
	// kernel cannot make (socket(..., IPPROTO_SCTP) fails with
	// EPROTONOSUPPORT): decided from what the test did (its failing probe
	// and the kernel's answer), never by skipping it.
	NoSCTP = "cannot run here"
)

// NoSCTPReason is what the report says of a NoSCTP test.
const NoSCTPReason = "cannot run on this machine (no SCTP in this kernel)"

// Report is one run of the suite.
type Report struct {
	Meta     Meta
	Suite    string   // module@version of the suite
	Features []string // --supported-features
	RunFlag  string   // the -test.run pattern
	// Setup is what TestConformance itself said when it failed outside
	// every test (its pods never got ready, say).
	Setup []string `json:",omitempty"`
	Tests []*Test  // the suite's tests, in the order they ran
	Wall  time.Duration
	// WithoutSCTPProbes is the second run, where the kernel has no SCTP:
	// the tests of this run that stopped at an SCTP probe, run again
	// with the suite's SCTP probes not made (NETCUBE_CNP_SCTP_PROBES=skip,
	// hack/build-cnp-conformance.sh), so that every TCP and UDP probe
	// after them is made and judged.
	WithoutSCTPProbes *Report `json:",omitempty"`
}

// Meta says what was measured, and how.
type Meta struct {
	Commit      string
	Command     string
	Environment string
	Date        string
}

// Test is one of the suite's tests (TestConformance/<ShortName>) or a
// subtest of one.
type Test struct {
	Name    string // its own segment of the Go test name, as t.Run made it
	Result  string // Passed, Failed, Skipped, NoSCTP
	Reason  string `json:",omitempty"` // why skipped, or NoSCTPReason
	Seconds float64
	Failure []string `json:",omitempty"` // its own failure lines (repeated lines once, with a count)
	// SCTPProbesNotMade counts the SCTP probes the suite logged as not
	// made, its subtests' included (only in a run WithoutSCTPProbes).
	SCTPProbesNotMade int     `json:",omitempty"`
	Subtests          []*Test `json:",omitempty"`
}

// Counts of results.
type Counts struct {
	Passed, Failed, Skipped, NoSCTP int
}

// Total is every result counted.
func (c Counts) Total() int { return c.Passed + c.Failed + c.Skipped + c.NoSCTP }

func (c *Counts) add(result string) {
	switch result {
	case Passed:
		c.Passed++
	case Skipped:
		c.Skipped++
	case NoSCTP:
		c.NoSCTP++
	default:
		c.Failed++
	}
}

// Totals counts the suite's tests, and their subtests (the leaves).
func (r *Report) Totals() (tests, subtests Counts) {
	for _, t := range r.Tests {
		tests.add(t.Result)
		for _, s := range t.Subtests {
			subtests.add(s.Result)
		}
	}
	return tests, subtests
}

// Failed is whether anything failed that this machine can run, the
// suite's setup included, in either run.
func (r *Report) Failed() bool {
	t, _ := r.Totals()
	if t.Failed > 0 || len(r.Setup) > 0 || len(r.Tests) == 0 {
		return true
	}
	return r.WithoutSCTPProbes != nil && r.WithoutSCTPProbes.Failed()
}

// FailedTests counts r's failed tests (none when r is nil).
func (r *Report) FailedTests() int {
	if r == nil {
		return 0
	}
	t, _ := r.Totals()
	return t.Failed
}

// StoppedAtSCTP are the names of the tests with a subtest (or
// themselves) that cannot run here: the ones to run WithoutSCTPProbes.
func (r *Report) StoppedAtSCTP() []string {
	var names []string
	for _, t := range r.Tests {
		if len(leaves(t, NoSCTP)) > 0 {
			names = append(names, t.Name)
		}
	}
	return names
}

// WriteJSON writes the report.
func (r *Report) WriteJSON(file string) error {
	b, err := json.MarshalIndent(r, "", "  ")
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
	return &r, json.Unmarshal(b, &r)
}
