package cnp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Root is the suite's one Go test; its subtests are the suite's tests.
const Root = "TestConformance"

// event is one line of `go tool test2json`.
type event struct {
	Action  string
	Test    string
	Elapsed float64
	Output  string
}

// node is a test while its events arrive.
type node struct {
	test     *Test
	action   string // its last pass, fail or skip
	output   []string
	children []*node
}

// Parser builds a Report's tests from the suite's test2json events, in
// the order they arrive; Done reports each test of the suite as it ends.
type Parser struct {
	root  *node
	nodes map[string]*node
	// Done, when set, is called as each of the suite's tests ends.
	Done func(*Test)
}

// NewParser starts an empty run.
func NewParser() *Parser {
	root := &node{test: &Test{Name: Root}}
	return &Parser{root: root, nodes: map[string]*node{Root: root}}
}

// Read consumes test2json's stream until its end.
func (p *Parser) Read(r io.Reader) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var e event
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return fmt.Errorf("test2json: %w: %q", err, s.Text())
		}
		p.add(e)
	}
	return s.Err()
}

// add files one event under its test.
func (p *Parser) add(e event) {
	if e.Test == "" || (e.Test != Root && !strings.HasPrefix(e.Test, Root+"/")) {
		return // the binary's own lines (PASS, FAIL, ok): the root's end says it all
	}
	n := p.node(e.Test)
	switch e.Action {
	case "output":
		n.output = append(n.output, strings.TrimRight(e.Output, "\n"))
	case "pass", "fail", "skip":
		n.action = e.Action
		n.test.Seconds = e.Elapsed
		if strings.Count(e.Test, "/") == 1 && p.Done != nil {
			classify(n)
			p.Done(n.test)
		}
	}
}

// node finds or creates the test named, and its parents.
func (p *Parser) node(name string) *node {
	if n, ok := p.nodes[name]; ok {
		return n
	}
	i := strings.LastIndexByte(name, '/')
	parent := p.node(name[:i])
	n := &node{test: &Test{Name: name[i+1:]}}
	parent.children = append(parent.children, n)
	parent.test.Subtests = append(parent.test.Subtests, n.test)
	p.nodes[name] = n
	return n
}

// Tests classifies every test and returns the suite's, and what the
// root said of a failure of its own (its setup: the pods never ready, the
// cluster unreachable, the binary ending early).
func (p *Parser) Tests() (tests []*Test, setup []string) {
	classify(p.root)
	tests = p.root.test.Subtests
	switch p.root.action {
	case "pass":
		return tests, nil
	case "":
		return tests, append(ownErrors(p.root.output), Root+" did not finish (the suite binary exited, timed out or panicked: see its log)")
	}
	if own := ownErrors(p.root.output); len(own) > 0 {
		return tests, own
	}
	for _, t := range tests {
		if t.Result == Failed || t.Result == NoSCTP {
			return tests, nil // its failure is its tests'
		}
	}
	return tests, []string{Root + " failed with no failure of its own nor of a test: see its log"}
}

// ownErrors are the root's failure lines when it reported an error of its
// own (testify's, t.Error's or a panic), not only its progress logs.
func ownErrors(out []string) []string {
	lines := failureLines(out)
	for _, l := range lines {
		if strings.Contains(l, "Error") || strings.Contains(l, "panic:") || strings.Contains(l, "error") {
			return lines
		}
	}
	return nil
}

// classify sets the result of n and its subtests from their events.
func classify(n *node) {
	var kids Counts
	for _, c := range n.children {
		classify(c)
		kids.add(c.test.Result)
	}
	t := n.test
	own := failureLines(n.output)
	t.SCTPProbesNotMade = 0
	for _, l := range n.output {
		if strings.Contains(l, sctpProbeNotMade) {
			t.SCTPProbesNotMade++
		}
	}
	for _, c := range n.children {
		t.SCTPProbesNotMade += c.test.SCTPProbesNotMade
	}
	switch {
	case n.action == "pass":
		t.Result = Passed
	case n.action == "skip":
		t.Result, t.Reason = Skipped, skipReason(n.output)
	case n.action == "":
		t.Result, t.Failure = Failed, append(own, "did not finish (the suite binary exited, timed out or panicked)")
	case len(n.children) == 0 && failedOverSCTP(n.output):
		t.Result, t.Reason = NoSCTP, NoSCTPReason
		t.Failure = own
	case len(n.children) > 0 && kids.Failed == 0 && kids.NoSCTP > 0 && len(ownErrors(n.output)) == 0:
		t.Result, t.Reason = NoSCTP, NoSCTPReason
	default:
		t.Result, t.Failure = Failed, own
	}
}

// sctpProbeNotMade is what the patched suite logs of each SCTP probe it
// does not make (NETCUBE_CNP_SCTP_PROBES=skip).
const sctpProbeNotMade = "SCTP PROBE NOT MADE"

// failedCommand is what the suite logs of a probe that did not answer as
// expected (conformance/utils/kubernetes: doPokeServer), once per try.
var failedCommand = regexp.MustCompile(`FAILED Command was \[/agnhost connect .*--protocol=(\w+)`)

// failedOverSCTP: the probe that failed the test (the suite stops a test
// at its first probe that never answers as expected, so the last one
// logged) was over SCTP, and the kernel answered it "protocol not
// supported" (agnhost connect's error of socket(..., IPPROTO_SCTP)), not a
// verdict of the datapath's.
func failedOverSCTP(out []string) bool {
	last := ""
	for _, l := range out {
		if m := failedCommand.FindStringSubmatch(l); m != nil {
			last = m[1]
		}
	}
	if last != "sctp" {
		return false
	}
	for _, l := range out {
		if strings.Contains(l, "protocol not supported") {
			return true
		}
	}
	return false
}

// fileLine is the file:line prefix of a t.Log line.
var fileLine = regexp.MustCompile(`^\s*[\w.-]+\.go:\d+: `)

// skipReason is the t.Skip line of a skipped test.
func skipReason(out []string) string {
	for i := len(out) - 1; i >= 0; i-- {
		l := out[i]
		if strings.HasPrefix(strings.TrimSpace(l), "--- SKIP") || strings.HasPrefix(l, "=== ") || strings.TrimSpace(l) == "" {
			continue
		}
		return strings.TrimSpace(fileLine.ReplaceAllString(l, ""))
	}
	return "skipped, saying nothing"
}

// failureLines are a failed test's own lines without the framing; a line
// said again (each try of a probe logs the same two lines, every half
// second for ten seconds) is kept once, where it was first said, with its
// count.
func failureLines(out []string) []string {
	var lines []string
	seen := map[string]int{}
	counts := map[string]int{}
	for _, l := range out {
		s := strings.TrimSpace(l)
		if s == "" || strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- ") {
			continue
		}
		l = strings.TrimRight(strings.TrimPrefix(l, "    "), " \t")
		counts[l]++
		if _, ok := seen[l]; !ok {
			seen[l] = len(lines)
			lines = append(lines, l)
		}
	}
	for i, l := range lines {
		if counts[l] > 1 {
			lines[i] = fmt.Sprintf("%s  [x%d]", l, counts[l])
		}
	}
	return lines
}
