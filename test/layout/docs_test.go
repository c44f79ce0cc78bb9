package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	makeRef = regexp.MustCompile(`(?:^|[\s(;&|])make ([a-z][a-z0-9-]*)`)
	testRef = regexp.MustCompile("`((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)`")
	// A command: at the start of a span or line, or after "-- ", "$ ",
	// "sudo ", a pipe or a semicolon (not a message that names netcube).
	verbRef = regexp.MustCompile(`(?m)(?:^|-- |\$ |sudo |[|;&(] ?)(?:\S*/)?(netcube|netcube-lab) ([a-z][a-z0-9-]*)`)
	fenced  = regexp.MustCompile("(?ms)^```[a-z]*\n(.*?)^```")
	target  = regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`)
	testDef = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]*)\(`)
	caseVal = regexp.MustCompile(`case "([a-z0-9-]+)"`)
)

// docPages are the pages a reader is sent to: the README and docs/ (the
// benchmark and conformance reports aside: they are written by the
// commands they name).
func docPages(t *testing.T, root string) []string {
	pages := []string{"README.md"}
	for _, glob := range []string{"docs/*.md", "docs/networking/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			pages = append(pages, rel)
		}
	}
	return pages
}

// TestDocsNameWhatExists: every repository path, relative link, `make`
// target, netcube and netcube-lab verb and test name that the README and
// the docs pages give exists, so a page cannot send a reader to what has
// moved or gone. (What the commands print is checked where they run:
// TestOperatorVerbsRunAsPrinted for the operator's first commands.)
func TestDocsNameWhatExists(t *testing.T) {
	root := "../.."
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range target.FindAllStringSubmatch(string(makefile), -1) {
		targets[m[1]] = true
	}
	tests := map[string]bool{}
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, m := range testDef.FindAllStringSubmatch(string(b), -1) {
			tests[m[1]] = true
		}
		return nil
	})
	verbs := map[string]map[string]bool{"netcube": {}, "netcube-lab": {}}
	for bin, file := range map[string]string{"netcube": "cmd/netcube/main.go", "netcube-lab": "lab/cmd/netcube-lab/main.go"} {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`verb == "([a-z-]+)"`).FindAllStringSubmatch(string(b), -1) {
			verbs[bin][m[1]] = true
		}
		for _, m := range caseVal.FindAllStringSubmatch(string(b), -1) {
			verbs[bin][m[1]] = true
		}
	}
	// Positive controls: each table was read, and a made-up name is caught.
	if !targets["demo"] || !tests["TestDocsNameWhatExists"] || !verbs["netcube"]["status"] || !verbs["netcube-lab"]["sandbox"] || targets["no-such-target"] {
		t.Fatalf("tables not read: make demo %v, this test %v, netcube status %v, netcube-lab sandbox %v",
			targets["demo"], tests["TestDocsNameWhatExists"], verbs["netcube"]["status"], verbs["netcube-lab"]["sandbox"])
	}
	pages := docPages(t, root)
	if !slices.Contains(pages, "docs/getting-started.md") || !slices.Contains(pages, "docs/networking/services.md") {
		t.Fatalf("pages read: %v", pages)
	}
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		md := string(b)
		for _, p := range missing(root, pathsNamed(md)) {
			if strings.ContainsAny(p, "<{*") || strings.Contains(p, "/count/") {
				continue // a pattern, or cubes.md's worked example of a new cube
			}
			t.Errorf("%s names %s, which does not exist", page, p)
		}
		// Commands are read from code only: spans and fenced blocks.
		var codeText []string
		for _, m := range fenced.FindAllStringSubmatch(md, -1) {
			codeText = append(codeText, m[1])
		}
		for _, m := range code.FindAllStringSubmatch(fenced.ReplaceAllString(md, ""), -1) {
			codeText = append(codeText, m[1])
		}
		commands := strings.Join(codeText, "\n")
		for _, m := range mdLink.FindAllStringSubmatch(md, -1) {
			link := strings.SplitN(m[1], "#", 2)[0]
			if link == "" || strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.Dir(page), link)); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, m[1])
			}
		}
		for _, m := range makeRef.FindAllStringSubmatch(commands, -1) {
			if !targets[m[1]] && !strings.HasSuffix(m[1], "-") { // "make bench-*": a pattern
				t.Errorf("%s names `make %s`: no such target in the Makefile", page, m[1])
			}
		}
		for _, m := range testRef.FindAllStringSubmatch(md, -1) {
			if !tests[m[1]] {
				t.Errorf("%s names %s: no such test in the tree", page, m[1])
			}
		}
		for _, m := range verbRef.FindAllStringSubmatch(commands, -1) {
			if !verbs[m[1]][m[2]] {
				t.Errorf("%s names `%s %s`: no such verb", page, m[1], m[2])
			}
		}
	}
}
