package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// RunHeader is what a report says of the run that measured it: the
// commit, when, on which machine, how many runs of how long, and the
// command that repeats it. Embedded in a report, its JSON fields are the
// report's own.
type RunHeader struct {
	Commit     string    `json:"commit"`
	MeasuredAt time.Time `json:"measured_at"`
	Machine    string    `json:"machine"`
	Runs       int       `json:"runs"`
	DurationS  float64   `json:"duration_s"`
	Command    string    `json:"command"`
}

// newRunHeader is the header of a run starting now, on this machine, at
// the commit built.
func newRunHeader(runs int, duration time.Duration, command string) RunHeader {
	host, _ := os.Hostname()
	return RunHeader{Commit: Commit(), MeasuredAt: time.Now().UTC(), Runs: runs, DurationS: duration.Seconds(),
		Machine: fmt.Sprintf("%s (kernel %s, %d CPUs)", host, kernelRelease(), runtime.NumCPU()), Command: command}
}

// writeReportFiles writes a report under dir: name.json (v, indented),
// name.md and plots/name.svg.
func writeReportFiles(dir, name string, v any, markdown, svg string) error {
	if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "plots", name+".svg"), []byte(svg), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(markdown), 0o644)
}
