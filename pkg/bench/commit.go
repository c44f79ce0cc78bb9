package bench

import (
	"os/exec"
	"strings"
)

// Commit names the netcube commit being measured, for every report to say
// which code its figures are of: the short hash, with "-dirty" when the
// tree has changes beyond the reports themselves (docs/benchmarks), or
// "unknown" outside a git checkout.
func Commit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--", ".", ":!docs/benchmarks").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "-dirty"
	}
	return c
}
