package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// A runnable part of a docs page: a fenced `sh` block, or a code span,
// made only of commands against the demo's sandbox (named nc): the
// checkout's bin/ commands, an eval of `sandbox env`, copying an example
// into the sandbox's manifests or removing it. Anything else on a page
// (make targets, helm and kubectl on a real cluster) is checked where it
// runs: TestDocsNameWhatExists for the targets and verbs,
// TestInstallPageRenders for the install page's helm commands.
type docsCommand struct {
	page, script string
	offset       int
}

var (
	shBlock     = regexp.MustCompile("(?ms)^```sh\n(.*?)^```")
	codeSpan    = regexp.MustCompile("`([^`\n]+)`")
	sandboxLine = regexp.MustCompile(`^(bin/|eval "\$\(bin/netcube-lab sandbox env |cp docs/examples/[a-z0-9-]+\.yaml /run/netcube/nc/manifests/$|rm /run/netcube/nc/manifests/)`)
	// A span is a command to run only when it acts on the sandbox: not
	// its lifecycle (up, down: the test's own), not a placeholder.
	spanRun = regexp.MustCompile(`^(bin/netcube-lab sandbox (exec|status|env) |bin/netcube |rm /run/netcube/nc/manifests/)`)
)

// docsCommands reads every page's runnable parts, in page order.
func docsCommands(t *testing.T, pages []string) []docsCommand {
	var out []docsCommand
	for _, page := range pages {
		var onPage []docsCommand
		b, err := os.ReadFile(filepath.Join("..", "..", page))
		if err != nil {
			t.Fatal(err)
		}
		md := string(b)
		for _, m := range shBlock.FindAllStringSubmatchIndex(md, -1) {
			block := md[m[2]:m[3]]
			runnable := true
			for _, line := range strings.Split(block, "\n") {
				line = strings.TrimSpace(line)
				if line != "" && !strings.HasPrefix(line, "#") && !sandboxLine.MatchString(line) {
					runnable = false
				}
			}
			if runnable {
				onPage = append(onPage, docsCommand{page: page, script: block, offset: m[0]})
			}
		}
		outside := shBlock.ReplaceAllStringFunc(md, func(s string) string { return strings.Repeat(" ", len(s)) })
		for _, m := range codeSpan.FindAllStringSubmatchIndex(outside, -1) {
			span := outside[m[2]:m[3]]
			if spanRun.MatchString(span) && !strings.ContainsAny(span, "<>[]|") && !strings.Contains(span, " NODE") {
				onPage = append(onPage, docsCommand{page: page, script: span, offset: m[0]})
			}
		}
		sort.Slice(onPage, func(i, j int) bool { return onPage[i].offset < onPage[j].offset })
		out = append(out, onPage...)
	}
	return out
}

// forSandbox rewrites a page's command for the demo's sandbox (nc) into
// one for the sandbox named name, whose state is under stateDir.
func forSandbox(script, name, stateDir string) string {
	script = regexp.MustCompile(`sandbox (exec|status|env)( --name nc)?`).ReplaceAllString(script, "sandbox $1 --name "+name)
	return strings.ReplaceAll(script, "/run/netcube/nc/", stateDir+"/")
}

// docsPages are the README and the docs pages by task.
func docsPages(t *testing.T) []string {
	pages := []string{"README.md"}
	for _, glob := range []string{"docs/*.md", "docs/networking/*.md"} {
		m, err := filepath.Glob(filepath.Join("..", "..", glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(filepath.Join("..", ".."), p)
			pages = append(pages, rel)
		}
	}
	return pages
}

// TestDocsCommandsAreFound: the reader of the pages finds what
// TestOperatorVerbsRunAsPrinted runs (no root: it only reads the pages).
func TestDocsCommandsAreFound(t *testing.T) {
	cmds := docsCommands(t, docsPages(t))
	seen := map[string]bool{}
	for _, c := range cmds {
		seen[c.page] = true
	}
	for _, page := range []string{"README.md", "docs/getting-started.md", "docs/observability.md"} {
		if !seen[page] {
			t.Errorf("no runnable commands found on %s", page)
		}
	}
	got := forSandbox("bin/netcube-lab sandbox exec n1p1 -- x; bin/netcube-lab sandbox env --name nc node1; cp a /run/netcube/nc/manifests/", "ov1", "/run/netcube/ov1")
	want := "bin/netcube-lab sandbox exec --name ov1 n1p1 -- x; bin/netcube-lab sandbox env --name ov1 node1; cp a /run/netcube/ov1/manifests/"
	if got != want {
		t.Errorf("forSandbox:\n got %s\nwant %s", got, want)
	}
	for _, c := range cmds {
		for _, line := range strings.Split(c.script, "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			if strings.Contains(line, "make ") || strings.Contains(line, "sandbox up") || strings.Contains(line, "sandbox down") {
				t.Errorf("%s: %q is not a command against a running sandbox", c.page, line)
			}
		}
	}
	t.Logf("%d runnable parts on %d pages", len(cmds), len(seen))
}
