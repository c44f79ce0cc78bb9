package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/netcube/netcube/lab/faultrec"
)

// ReliabilityReport is what the fault tests measured (`make reliability`
// runs them, long versions, each appending its faultrec.Record), as
// docs/benchmarks/reliability.{json,md} and a plot.
type ReliabilityReport struct {
	Commit     string            `json:"commit"`
	MeasuredAt time.Time         `json:"measured_at"`
	Machine    string            `json:"machine"`
	Command    string            `json:"command"`
	Faults     []faultrec.Record `json:"faults"`
	// Runs are the runs of the fault tests, one after another, and whether
	// each passed (every test's own assertions). They are one `make
	// reliability`, so Commit is theirs: read when the report is written,
	// "-dirty" if the checkout moved on from the commit the binary was
	// built from before the first run.
	Runs []ReliabilityRun `json:"runs,omitempty"`
}

// ReliabilityRun is one run of the fault tests: its number and its go
// test exit status.
type ReliabilityRun struct {
	Run    int  `json:"run"`
	Passed bool `json:"passed"`
}

// ReadReliabilityRuns reads the runs' results: one line per run, "RUN EXIT".
func (r *ReliabilityReport) ReadReliabilityRuns(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for n, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var run, exit int
		if _, err := fmt.Sscanf(line, "%d %d", &run, &exit); err != nil {
			return fmt.Errorf("%s line %d: %q: want RUN EXIT", path, n+1, line)
		}
		r.Runs = append(r.Runs, ReliabilityRun{Run: run, Passed: exit == 0})
	}
	return nil
}

// ReadReliability reads the records of one run (JSON lines).
func ReadReliability(path string) (*ReliabilityReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	host, _ := os.Hostname()
	r := &ReliabilityReport{Commit: Commit(), MeasuredAt: time.Now().UTC(), Command: "make reliability",
		Machine: fmt.Sprintf("%s (kernel %s, %d CPUs)", host, kernelRelease(), runtime.NumCPU())}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var rec faultrec.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		r.Faults = append(r.Faults, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(r.Faults) == 0 {
		return nil, fmt.Errorf("%s: no fault records (did the tests run with NETCUBE_RELIABILITY_OUT set?)", path)
	}
	return r, nil
}

// Write writes reliability.json, reliability.md and plots/reliability.svg
// under dir.
func (r *ReliabilityReport) Write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "reliability.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "plots", "reliability.svg"), []byte(r.svg()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "reliability.md"), []byte(r.Markdown()), 0o644)
}

// Markdown renders the report: one row per fault.
func (r *ReliabilityReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# Reliability: faults under load\n\n")
	fmt.Fprintf(&b, "Measured at netcube commit `%s` on %s, %s, by `%s` (the fault tests of `make test`, in their long versions).\n\n",
		r.Commit, r.MeasuredAt.Format("2006-01-02"), r.Machine, r.Command)
	b.WriteString("Held: long-lived connections still answering from their backend after the fault; lost: reset, timed out or moved. " +
		"New: connections opened during the fault, and how many failed. Converge: from the end of the fault to the agent ready " +
		"(or the desired state applied).\n\n")
	if len(r.Runs) > 0 {
		fmt.Fprintf(&b, "%d runs, one after another, of every fault test:\n\n| run | result | established connections lost | new connections failed |\n|---:|---|---:|---:|\n", len(r.Runs))
		for _, run := range r.Runs {
			lost, failed := 0, 0
			for _, f := range r.Faults {
				if f.Run == run.Run {
					lost += f.Lost
					failed += f.NewErrors
				}
			}
			result := "passed"
			if !run.Passed {
				result = "**failed**"
			}
			fmt.Fprintf(&b, "| %d | %s | %d | %d |\n", run.Run, result, lost, failed)
		}
		b.WriteString("\n")
	}
	b.WriteString("| run | fault | path | held | lost | new connections | failed | converge s | note |\n|---:|---|---|---:|---:|---:|---:|---:|---|\n")
	lost := 0
	for _, f := range r.Faults {
		conv := "-"
		if f.ConvergeSeconds > 0 {
			conv = fmt.Sprintf("%.2f", f.ConvergeSeconds)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %s | %s |\n", runOf(f), f.Fault, orDash(f.Path), f.Held, f.Lost, f.NewConnections, f.NewErrors, conv, f.Note)
		lost += f.Lost
	}
	fmt.Fprintf(&b, "\nEstablished connections lost in all: **%d** (the promise: none).\n\n![held and lost](plots/reliability.svg)\n", lost)
	return b.String()
}

func runOf(f faultrec.Record) string {
	if f.Run == 0 {
		return "-"
	}
	return fmt.Sprint(f.Run)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// svg draws held and lost connections per fault, as horizontal bars.
func (r *ReliabilityReport) svg() string {
	const rowH, left, width = 26, 360, 300
	max := 1
	for _, f := range r.Faults {
		if n := f.Held + f.Lost; n > max {
			max = n
		}
	}
	h := rowH*len(r.Faults) + 50
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", left+width+80, h)
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="14">Long-lived connections through each fault: held (green), lost (red)</text>`+"\n")
	for i, f := range r.Faults {
		y := 34 + i*rowH
		label := f.Fault
		if f.Path != "" {
			label += " (" + f.Path + ")"
		}
		if len(label) > 58 {
			label = label[:55] + "..."
		}
		heldW := width * f.Held / max
		lostW := width * f.Lost / max
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+14, escape(label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="18" fill="#3a3"/>`+"\n", left, y, heldW)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="18" fill="#c33"/>`+"\n", left+heldW, y, lostW)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%d / %d</text>`+"\n", left+heldW+lostW+6, y+14, f.Held, f.Lost)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
