package netpol

import (
	"encoding/json"
	"os"
	"slices"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/generator"
)

// Report is one run's results.
type Report struct {
	Meta      Meta
	Generated int // cases cyclonus generated
	Cases     []Case
	NotRun    []NotRun // generated cases that cannot run here (NotRunTags)
	Wall      time.Duration
}

// Meta says what was measured, and how.
type Meta struct {
	Commit      string
	Command     string
	Environment string
	Date        string
}

// Case is one test case's outcome.
type Case struct {
	Description string
	Tags        map[string][]string // primary tag -> its sub-tags
	Passed      bool
	Steps       int
	Tries       int          // probe rounds over all steps (a differing step is probed again)
	Probes      []ProbeCount // the last try of each step
	Failure     string       `json:",omitempty"` // each failed step's table, live vs matcher
	Err         string       `json:",omitempty"` // the case could not run
	Seconds     float64
}

// Duration is how long the case took.
func (c Case) Duration() time.Duration { return time.Duration(c.Seconds * float64(time.Second)) }

// ProbeCount counts one step's probes of one protocol that agree and
// differ with the matcher.
type ProbeCount struct {
	Step          int
	Protocol      string
	Agree, Differ int
}

// NotRun is a generated case left out, and the tag that made it so.
type NotRun struct {
	Description string
	Tag         string
}

// Counts are a feature's passed and failed cases.
type Counts struct{ Passed, Failed int }

// Totals counts every case run.
func (r *Report) Totals() Counts {
	var c Counts
	for _, cs := range r.Cases {
		c.add(cs.Passed)
	}
	return c
}

func (c *Counts) add(passed bool) {
	if passed {
		c.Passed++
	} else {
		c.Failed++
	}
}

// ByTag counts cases per primary tag and per sub-tag (cyclonus's
// conformance summary).
func (r *Report) ByTag() (map[string]Counts, map[string]map[string]Counts) {
	primary, sub := map[string]Counts{}, map[string]map[string]Counts{}
	for _, cs := range r.Cases {
		for p, subs := range cs.Tags {
			c := primary[p]
			c.add(cs.Passed)
			primary[p] = c
			if sub[p] == nil {
				sub[p] = map[string]Counts{}
			}
			for _, s := range subs {
				c := sub[p][s]
				c.add(cs.Passed)
				sub[p][s] = c
			}
		}
	}
	return primary, sub
}

// Smoke picks the fast subset: in generation order, each case that
// covers a sub-tag no case picked before covers, so that every feature
// the generator exercises is exercised once.
func Smoke(cases []*generator.TestCase) []*generator.TestCase {
	seen := map[string]bool{}
	var out []*generator.TestCase
	for _, c := range cases {
		var tags []string
		for t := range c.Tags {
			tags = append(tags, t)
		}
		slices.Sort(tags)
		novel := false
		for _, t := range tags {
			novel = novel || !seen[t]
		}
		if !novel {
			continue
		}
		for _, t := range tags {
			seen[t] = true
		}
		out = append(out, c)
	}
	return out
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
