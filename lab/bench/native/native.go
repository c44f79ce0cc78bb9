// Package native holds the benchmarks' native traffic generator, ncperf
// (request/response and connection rate in C: the Go generator costs a
// third of this machine's connection rate), and builds it.
package native

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed src/ncperf.c
var source []byte

// Build compiles ncperf into dir and returns its path.
func Build(dir string) (string, error) {
	src := filepath.Join(dir, "ncperf.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ncperf")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Werror", "-o", bin, src, "-lm").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ncperf: %v\n%s", err, out)
	}
	return bin, nil
}

// BuildTemp compiles ncperf into a directory of its own, removed by done.
func BuildTemp() (bin string, done func(), err error) {
	dir, err := os.MkdirTemp("", "netcube-ncperf-")
	if err != nil {
		return "", nil, err
	}
	done = func() { _ = os.RemoveAll(dir) }
	if bin, err = Build(dir); err != nil {
		done()
		return "", nil, err
	}
	return bin, done, nil
}

// Result is one ncperf run, as it prints it.
type Result struct {
	Ops    int64   `json:"ops"`
	PerSec float64 `json:"per_sec"`
	P50    float64 `json:"p50_us"`
	P90    float64 `json:"p90_us"`
	P99    float64 `json:"p99_us"`
	P999   float64 `json:"p999_us"`
	Max    float64 `json:"max_us"`
	// Mean and Stddev cover every operation (0 in results from before
	// ncperf printed them).
	Mean   float64 `json:"mean_us,omitempty"`
	Stddev float64 `json:"stddev_us,omitempty"`
	Errors int64   `json:"errors"`
}
