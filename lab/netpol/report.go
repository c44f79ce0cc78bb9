package netpol

import (
	"encoding/json"
	"fmt"
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

// SmokeCases are the fast subset `make test` runs (about 4 minutes
// here): one case per kind of change (a policy updated, namespace and pod
// labels, pod churn) and a few single steps that cover every primary tag
// of cyclonus's (direction, rule, peers, ports by number, range and name,
// protocols, ip blocks, policy stacks, targets).
var SmokeCases = []string{
	"ingress: deny all",
	"ipblock with except",
	"nil pods + ns by label",
	"direction,egress,named-port,port,protocol,tcp",
	"direction,egress,end-port,numbered-port,port,protocol,tcp",
	"any-port,direction,egress,port,protocol,udp",
	"deny all from source, allow all to dest",
	"set namespace to x",
	"Create/update policy",
	"Update namespace so that policy applies, then again so it no longer applies",
	"Update pod so that policy applies, then again so it no longer applies",
	"Create/delete pod",
}

// Smoke returns the SmokeCases of cases, in their order; an error names
// one not found (cyclonus renamed it).
func Smoke(cases []*generator.TestCase) ([]*generator.TestCase, error) {
	var out []*generator.TestCase
	for _, want := range SmokeCases {
		i := slices.IndexFunc(cases, func(c *generator.TestCase) bool { return c.Description == want })
		if i < 0 {
			return nil, fmt.Errorf("cyclonus generated no case %q", want)
		}
		out = append(out, cases[i])
	}
	return out, nil
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
