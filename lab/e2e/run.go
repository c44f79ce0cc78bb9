package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// Options say what to run and where.
type Options struct {
	Sandbox *sandbox.Sandbox // up, with real nodes
	Focus   string           // ginkgo focus (Focus, SmokeFocus())
	Skip    string           // ginkgo skip (SkipPattern())
	Procs   int              // parallel ginkgo processes; serial tests run alone at the end
	Dir     string           // ginkgo's reports and the suite's logs
	Timeout time.Duration    // the whole suite
	Log     io.Writer        // progress: one line per finished test
}

// Run runs e2e.test through ginkgo in the sandbox's underlay namespace
// (where its API server listens) and returns the parsed report. A run
// with failed tests is not an error: the report says which.
func Run(o Options) (*Report, error) {
	cfg := o.Sandbox.Config
	if !cfg.Kubelet {
		return nil, fmt.Errorf("sandbox %s has no real nodes (up --kubelet)", cfg.Name)
	}
	if o.Procs == 0 {
		o.Procs = 4
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Hour
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	jsonReport := filepath.Join(o.Dir, "ginkgo.json")
	_ = os.Remove(jsonReport)
	args := []string{"--net=/run/netns/" + o.Sandbox.Topology.Underlay, "--",
		filepath.Join(cfg.E2EDir, "ginkgo"),
		"--procs", strconv.Itoa(o.Procs), "--no-color", "--silence-skips", "--succinct",
		"--timeout", o.Timeout.String(), "--json-report", filepath.Base(jsonReport), "--output-dir", o.Dir,
		"--focus", o.Focus}
	if o.Skip != "" {
		args = append(args, "--skip", o.Skip)
	}
	args = append(args, filepath.Join(cfg.E2EDir, "e2e.test"), "--",
		"--kubeconfig", o.Sandbox.Topology.Kubeconfig(),
		"--kubectl-path", filepath.Join(cfg.E2EDir, "kubectl"),
		"--provider", "skeleton", "--num-nodes", strconv.Itoa(len(o.Sandbox.Topology.Nodes)),
		"--node-os-distro", "debian", "--report-dir", o.Dir)
	cmd, cleanup, err := kubeenv.SuiteCommand("nsenter", args...)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	logFile, err := os.Create(filepath.Join(o.Dir, "e2e.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	// PATH: the suite runs kubectl by name in places.
	cmd.Env = append(cmd.Env, "PATH="+cfg.E2EDir+":"+os.Getenv("PATH"))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { progress(pr, logFile, o.Log); close(done) }()
	runErr := cmd.Wait()
	pw.Close()
	<-done
	selected, err := regexp.Compile(o.Focus)
	if err != nil {
		return nil, fmt.Errorf("focus %q: %w", o.Focus, err)
	}
	rep, err := ReadReport(jsonReport, selected)
	if err != nil {
		return nil, fmt.Errorf("ginkgo (%v) wrote no report: %w; see %s", runErr, err, logFile.Name())
	}
	return rep, nil
}

// progress copies the suite's output to the log and reports on out each
// finished test: ginkgo's succinct output marks one with "•" (a passed
// test's mark is not followed by a newline), then the name of a failed one.
func progress(r io.Reader, log io.Writer, out io.Writer) {
	br := bufio.NewReader(io.TeeReader(r, log))
	done, failed := 0, 0
	pending := false // the last mark was a failure's: its name follows
	var line strings.Builder
	for {
		c, _, err := br.ReadRune()
		if err != nil {
			return
		}
		switch c {
		case '•':
			line.Reset()
			done++
			if out != nil {
				fmt.Fprintf(out, "  e2e: %d tests done, %d failed\n", done, failed)
			}
		case '\n':
			t := strings.TrimSpace(line.String())
			line.Reset()
			switch {
			case strings.HasPrefix(t, "[FAILED]") || strings.HasPrefix(t, "[TIMEDOUT]") || strings.HasPrefix(t, "[PANICKED]"):
				pending = true
			case pending && strings.HasPrefix(t, "[sig-network]"):
				pending = false
				failed++
				if out != nil {
					fmt.Fprintf(out, "  e2e: FAILED %s\n", t)
				}
			}
		default:
			line.WriteRune(c)
		}
	}
}
