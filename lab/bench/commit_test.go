package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A report names the commit measured: the one its binary was built from
// when the build says, else HEAD of the checkout; "-dirty" when that tree
// has changes beyond the reports; unknown outside a checkout.
func TestCommitOf(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	if got := commitOf(t.TempDir(), build{}); got != UnknownCommit {
		t.Errorf("outside a checkout: %q, want %q", got, UnknownCommit)
	}

	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("main.go", "package main\n")
	write("docs/benchmarks/sync.json", "{}\n")
	write("pkg/x/x.go", "package x\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	head := git("rev-parse", "HEAD")

	sub := filepath.Join(dir, "pkg", "x")
	if got := commitOf(dir, build{}); got != head[:12] {
		t.Errorf("clean tree: %q, want %q", got, head[:12])
	}
	if got := commitOf(sub, build{rev: head}); got != head[:12] {
		t.Errorf("clean tree, from a subdirectory, binary of HEAD: %q, want %q", got, head[:12])
	}
	write("docs/benchmarks/sync.json", "{\"changes\": 1}\n")
	if got := commitOf(sub, build{}); got != head[:12] {
		t.Errorf("only a report changed: %q, want %q", got, head[:12])
	}
	write("main.go", "package main\n\nfunc main() {}\n")
	if got := commitOf(sub, build{}); got != head[:12]+"-dirty" {
		t.Errorf("code changed (outside the working directory): %q, want %q", got, head[:12]+"-dirty")
	}
	// A binary built from a clean tree measures its own commit, whatever
	// the checkout holds now (an older build run in a newer checkout).
	older := strings.Repeat("ab", 20)
	if got := commitOf(dir, build{rev: older}); got != older[:12] {
		t.Errorf("binary built clean from another commit, checkout dirty: %q, want %q", got, older[:12])
	}
	if got := commitOf(dir, build{rev: older, dirty: true}); got != older[:12]+"-dirty" {
		t.Errorf("binary built from a dirty tree: %q, want %q", got, older[:12]+"-dirty")
	}
	git("checkout", "-q", "main.go")
	if got := commitOf(dir, build{rev: head, dirty: true}); got != head[:12]+"-dirty" {
		t.Errorf("binary built dirty, checkout clean now: %q, want %q", got, head[:12]+"-dirty")
	}
}

// make build stamps the lab's binary with its commit, "-dirty" as the
// tree was, and builtFrom reads that stamp first.
func TestBuiltFromStamp(t *testing.T) {
	defer func(s string) { builtCommit = s }(builtCommit)
	rev := strings.Repeat("cd", 20)
	for stamp, want := range map[string]build{rev: {rev: rev}, rev + "-dirty": {rev: rev, dirty: true}} {
		builtCommit = stamp
		if got := builtFrom(); got != want {
			t.Errorf("stamp %q: builtFrom() = %+v, want %+v", stamp, got, want)
		}
	}
}

// An entry from before reports named their commit says it is unknown.
func TestRecordedCommit(t *testing.T) {
	for in, want := range map[string]string{"": UnknownCommit, "not recorded": UnknownCommit, "527a979bd6f2": "527a979bd6f2"} {
		if got := recorded(in); got != want {
			t.Errorf("recorded(%q) = %q, want %q", in, got, want)
		}
	}
	if got := commitName(""); got != "commit unknown" {
		t.Errorf("commitName(\"\") = %q", got)
	}
}

// Points of a sync report merged from several sessions keep their own
// commits; those from before reports named theirs say unknown.
func TestSyncMergeKeepsCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sync.json")
	if err := os.WriteFile(path, []byte(`{"results": [{"services": 1000, "endpoints_per_service": 1}, {"services": 10000, "endpoints_per_service": 1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got := mergeResults(path, []SyncResult{{Commit: "0123456789ab", Services: 10000, Endpoints: 1}})
	if len(got) != 2 || got[0].Commit != UnknownCommit || got[1].Commit != "0123456789ab" {
		t.Errorf("merged %+v: want 1000 of an unknown commit, 10000 of 0123456789ab", got)
	}
}
