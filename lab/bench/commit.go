package bench

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
)

// UnknownCommit is the commit of figures whose code is not known: measured
// outside a git checkout, or before reports named their commit.
const UnknownCommit = "unknown"

// Commit names the netcube commit being measured, for every report, and
// every session or result a report keeps, to say which code its figures
// are of: `git rev-parse HEAD` of the checkout (its first 12 hex digits),
// with "-dirty" when the tree has changes beyond the reports themselves
// (docs/benchmarks). When the running binary was built from another
// commit (the checkout moved on after `make build`), it is that commit,
// "-dirty": the binaries measured are of it, but the tree they were built
// from is not known to have been clean. UnknownCommit outside a git
// checkout.
//
// It is read once, when a measurement first asks, so every entry of one
// session names the same commit even if the checkout changes meanwhile.
func Commit() string { return commitOnce() }

var commitOnce = sync.OnceValue(func() string { return commitOf("", builtFrom()) })

// commitOf is Commit for the checkout holding dir ("": the working
// directory), for a binary built from revision built ("": not known).
func commitOf(dir, built string) string {
	git := func(args ...string) ([]byte, error) {
		if dir != "" {
			args = append([]string{"-C", dir}, args...)
		}
		return exec.Command("git", args...).Output()
	}
	out, err := git("rev-parse", "HEAD")
	if err != nil {
		return UnknownCommit
	}
	head := strings.TrimSpace(string(out))
	if len(head) < 12 {
		return UnknownCommit
	}
	if len(built) >= 12 && built != head {
		return built[:12] + "-dirty"
	}
	// The whole tree, wherever in it dir is, but the reports.
	st, err := git("status", "--porcelain", "--", ":/", ":(top,exclude)docs/benchmarks")
	if err != nil || len(strings.TrimSpace(string(st))) > 0 {
		return head[:12] + "-dirty"
	}
	return head[:12]
}

// builtFrom is the revision the running binary was built from, as `go
// build` records it ("" when it did not: go test, go run, -buildvcs=false).
func builtFrom() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// recorded is commit c as a report keeps it: UnknownCommit for a
// measurement from before reports named theirs.
func recorded(c string) string {
	if c == "" || c == "not recorded" {
		return UnknownCommit
	}
	return c
}

// commitName is how a report's text names commit c.
func commitName(c string) string {
	return "commit " + recorded(c)
}
