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
// are of: the commit the running binary was built from (its first 12 hex
// digits), with "-dirty" when its tree had changes beyond the reports
// themselves (docs/benchmarks), as `make build` or the Go toolchain
// stamped it. The binaries a bench runs are of that build, whatever the
// checkout holds when it runs (an A/B run of an older build in a newer
// checkout names the older commit). A binary with no stamp (go test, go
// run) names the checkout's HEAD, "-dirty" as above; UnknownCommit
// outside a git checkout.
//
// It is read once, when a measurement first asks, so every entry of one
// session names the same commit even if the checkout changes meanwhile.
func Commit() string { return commitOnce() }

var commitOnce = sync.OnceValue(func() string { return commitOf("", builtFrom()) })

// builtCommit is set by `make build` (-ldflags "-X
// github.com/netcube/netcube/lab/bench.builtCommit=..."): the commit's 40
// hex digits, "-dirty" when the tree had changes beyond docs/benchmarks.
// The Go toolchain's own stamp (vcs.revision) is missing where GOFLAGS
// has -buildvcs=false, as on the lab's machines.
var builtCommit string

// build is the commit a binary was built from: rev "" when not known.
type build struct {
	rev   string
	dirty bool
}

// commitOf is Commit for a binary built from b, in the checkout holding
// dir ("": the working directory).
func commitOf(dir string, b build) string {
	if len(b.rev) >= 12 {
		if b.dirty {
			return b.rev[:12] + "-dirty"
		}
		return b.rev[:12]
	}
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
	// The whole tree, wherever in it dir is, but the reports.
	st, err := git("status", "--porcelain", "--", ":/", ":(top,exclude)docs/benchmarks")
	if err != nil || len(strings.TrimSpace(string(st))) > 0 {
		return head[:12] + "-dirty"
	}
	return head[:12]
}

// builtFrom is the commit the running binary was built from: make's
// stamp, else the Go toolchain's (vcs.revision; its vcs.modified counts
// changed reports too).
func builtFrom() build {
	if rev, dirty := strings.CutSuffix(builtCommit, "-dirty"); rev != "" {
		return build{rev: rev, dirty: dirty}
	}
	var b build
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.rev = s.Value
			case "vcs.modified":
				b.dirty = s.Value == "true"
			}
		}
	}
	return b
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
