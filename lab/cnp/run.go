package cnp

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/netcube/netcube/lab/kubeenv"
)

// Module and Version of the suite hack/build-cnp-conformance.sh builds
// (and whose CRD the chart carries: deploy's
// TestClusterNetworkPolicyCRDIsUpstreams).
const (
	Module  = "sigs.k8s.io/network-policy-api"
	Version = "v0.3.0"
)

// Features are the suite's features netcube claims (conformance/utils/
// suite: the standard one and both experimental ones, named ports and
// egress to nodes).
var Features = []string{"ClusterNetworkPolicy", "ClusterNetworkPolicyNamedPorts", "ClusterNetworkPolicyEgressNodePeers"}

// Smoke are the suite's tests `make test` runs (about three minutes with
// the suite's setup): an Admin-tier policy that accepts, denies and
// passes (to no NetworkPolicy) over TCP, with its rules reordered
// (CNPAdminTierEgressTCP); a Baseline-tier one that accepts and denies
// (CNPBaselineTierIngressTCP); and the tiers around NetworkPolicy: Admin
// denies over a NetworkPolicy's accept, Pass defers to a NetworkPolicy and,
// with none, to the Baseline tier (CNPAdminTierIntegration). Each runs
// whole, since a test's subtests build on each other's changes. None
// probes SCTP. Each fails where ClusterNetworkPolicy is not enforced.
var Smoke = []string{"CNPAdminTierEgressTCP", "CNPBaselineTierIngressTCP", "CNPAdminTierIntegration"}

// SuiteDir finds (building once) the suite: hack/build-cnp-conformance.sh,
// cached; NETCUBE_CNP_DIR names the directory instead.
func SuiteDir() (string, error) {
	return kubeenv.CachedBuild("NETCUBE_CNP_DIR", "build-cnp-conformance.sh")
}

// Options of a run.
type Options struct {
	// Suite is the directory hack/build-cnp-conformance.sh printed.
	Suite string
	// Kubeconfig of the cluster; the suite must reach its API server
	// and kubelets' exec streams from Netns.
	Kubeconfig string
	// Netns is the network namespace (a /run/netns name) the suite runs
	// in: the sandbox's underlay. Empty: this process's.
	Netns string
	// Features passed as --supported-features (default Features).
	Features []string
	// Match, if set, is a regexp of the suite's test names to run
	// (-test.run TestConformance/Match); Tests, if set, the names
	// exactly.
	Match string
	Tests []string
	// Dir gets the suite's log (cnp.log) and result events (cnp.jsonl).
	Dir string
	Log io.Writer
	// SkipSCTPProbes runs the suite with its SCTP probes not made
	// (NETCUBE_CNP_SCTP_PROBES=skip): for a second run, where the kernel
	// has no SCTP, of the tests that stopped at one.
	SkipSCTPProbes bool
}

// RunPattern is the -test.run pattern of o.
func (o Options) RunPattern() (string, error) {
	p := "^" + Root + "$"
	switch {
	case len(o.Tests) > 0 && o.Match != "":
		return "", fmt.Errorf("a run takes a --match or a list of tests, not both")
	case len(o.Tests) > 0:
		q := make([]string, len(o.Tests))
		for i, t := range o.Tests {
			q[i] = regexp.QuoteMeta(t)
		}
		p += "/^(" + strings.Join(q, "|") + ")$"
	case o.Match != "":
		if _, err := regexp.Compile(o.Match); err != nil {
			return "", fmt.Errorf("--match: %w", err)
		}
		p += "/" + o.Match
	}
	return p, nil
}

// Run runs the suite against the cluster and parses its results. An error
// is returned when the suite could not be run at all; its failures are
// the report's.
func Run(o Options) (*Report, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if len(o.Features) == 0 {
		o.Features = Features
	}
	pattern, err := o.RunPattern()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(o.Suite, "conformance.test")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("the suite: %w (hack/build-cnp-conformance.sh builds it)", err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	// -test.v=test2json: the framing go tool test2json reads exactly.
	// No -test.timeout: the suite's own timeouts bound each wait, and a
	// full run outlasts go test's default of 10 minutes.
	args := []string{bin, "-test.v=test2json", "-test.timeout=0", "-test.run", pattern,
		"--supported-features=" + strings.Join(o.Features, ",")}
	if o.Netns != "" {
		args = append([]string{"nsenter", "--net=/run/netns/" + o.Netns, "--"}, args...)
	}
	suite := exec.Command(args[0], args[1:]...)
	suite.Env = append(os.Environ(), "KUBECONFIG="+o.Kubeconfig)
	if o.SkipSCTPProbes {
		suite.Env = append(suite.Env, "NETCUBE_CNP_SCTP_PROBES=skip")
	}
	// The suite writes nothing to its working directory; its own, so a
	// stray file would land in the run's directory.
	suite.Dir = o.Dir
	logFile, err := os.Create(filepath.Join(o.Dir, "cnp.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	events, err := os.Create(filepath.Join(o.Dir, "cnp.jsonl"))
	if err != nil {
		return nil, err
	}
	defer events.Close()
	conv := exec.Command("go", "tool", "test2json", "-t", "-p", Module+"/conformance")
	suiteOut, err := suite.StdoutPipe()
	if err != nil {
		return nil, err
	}
	suite.Stderr = logFile
	conv.Stdin = io.TeeReader(suiteOut, logFile)
	convOut, err := conv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	conv.Stderr = o.Log
	rep := &Report{Suite: Module + "@" + Version, Features: o.Features, RunFlag: pattern}
	how := ""
	if o.SkipSCTPProbes {
		how = " with SCTP probes not made"
	}
	fmt.Fprintf(o.Log, "cnp: %s -test.run '%s' --supported-features=%s%s (log: %s)\n", rep.Suite, pattern, strings.Join(o.Features, ","), how, logFile.Name())
	start := time.Now()
	if err := conv.Start(); err != nil {
		return nil, fmt.Errorf("go tool test2json: %w", err)
	}
	if err := suite.Start(); err != nil {
		_ = conv.Process.Kill()
		_ = conv.Wait()
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	p := NewParser()
	done := 0
	p.Done = func(t *Test) {
		done++
		var c Counts
		for _, s := range t.Subtests {
			c.add(s.Result)
		}
		fmt.Fprintf(o.Log, "cnp: [%d] %s %s (%s)%s%s\n", done, strings.ToUpper(t.Result), t.Name, time.Duration(t.Seconds*float64(time.Second)).Round(time.Second), subtestSummary(c), probesNotMade(t))
		for _, s := range t.Subtests {
			if s.Result == Failed {
				fmt.Fprintf(o.Log, "    failed: %s\n", Display(s.Name))
			}
		}
	}
	progress := &setupProgress{log: o.Log}
	parseErr := p.Read(io.TeeReader(convOut, io.MultiWriter(events, progress)))
	suiteErr := suite.Wait()
	convErr := conv.Wait()
	rep.Wall = time.Since(start)
	rep.Tests, rep.Setup = p.Tests()
	if parseErr != nil {
		return rep, parseErr
	}
	if convErr != nil {
		return rep, fmt.Errorf("go tool test2json: %w", convErr)
	}
	// The suite exits 1 when a test failed: that is the report's to say.
	if _, ok := suiteErr.(*exec.ExitError); suiteErr != nil && !ok {
		return rep, fmt.Errorf("%s: %w", bin, suiteErr)
	}
	return rep, nil
}

// RunAfterCleanup runs the suite as Run does, right after another run:
// the earlier run's namespaces may still be terminating, and the suite's
// setup fails on them at once ("being terminated"). It tries again every
// 10 s for up to 3 minutes; any other result is returned as it is.
func RunAfterCleanup(o Options) (*Report, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rep, err := Run(o)
		if rep == nil || err != nil || !terminating(rep.Setup) || time.Now().After(deadline) {
			return rep, err
		}
		if o.Log != nil {
			fmt.Fprintln(o.Log, "cnp: the earlier run's namespaces are still terminating; trying again in 10 s")
		}
		time.Sleep(10 * time.Second)
	}
}

// terminating: the setup failed on a namespace being deleted.
func terminating(setup []string) bool {
	for _, l := range setup {
		if strings.Contains(l, "because it is being terminated") {
			return true
		}
	}
	return false
}

// subtestSummary counts a test's subtests for a progress line.
func subtestSummary(c Counts) string {
	if c.Total() == 0 {
		return ""
	}
	s := fmt.Sprintf(": %d of %d subtests passed", c.Passed, c.Total())
	if c.Failed > 0 {
		s += fmt.Sprintf(", %d failed", c.Failed)
	}
	if c.NoSCTP > 0 {
		s += fmt.Sprintf(", %d cannot run here (SCTP)", c.NoSCTP)
	}
	return s
}

// probesNotMade says a test's SCTP probes not made, for a progress line.
func probesNotMade(t *Test) string {
	if t.SCTPProbesNotMade == 0 {
		return ""
	}
	return fmt.Sprintf("; %d SCTP probes not made", t.SCTPProbesNotMade)
}

// Display is a test's name as its t.Run gave it (t.Run writes spaces as
// underscores).
func Display(name string) string { return strings.ReplaceAll(name, "_", " ") }

// setupProgress prints the suite's setup as it goes (applying the base
// manifests, waiting for the pods): the minutes before the first test
// ends are otherwise silent.
type setupProgress struct {
	log     io.Writer
	partial []byte
	last    string
}

var setupLine = regexp.MustCompile(`"Output":"\s*[\w.-]+\.go:\d+: (Test Setup: [^"]*|Namespaces and Pods in [^"]* are ready|StatefulSet replicas in namespace [^"]*)`)

func (s *setupProgress) Write(b []byte) (int, error) {
	s.partial = append(s.partial, b...)
	for {
		i := strings.IndexByte(string(s.partial), '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(s.partial[:i])
		s.partial = s.partial[i+1:]
		if !strings.Contains(line, `"Test":"`+Root+`"`) {
			continue
		}
		if m := setupLine.FindStringSubmatch(line); m != nil {
			msg := strings.TrimSuffix(m[1], `\n`)
			// The pods' wait logs every second: say each state once.
			if msg != s.last {
				fmt.Fprintf(s.log, "cnp: setup: %s\n", msg)
				s.last = msg
			}
		}
	}
}
