package netpol

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/connectivity"
	"github.com/mattfenwick/cyclonus/pkg/connectivity/probe"
	"github.com/mattfenwick/cyclonus/pkg/generator"
	"github.com/mattfenwick/cyclonus/pkg/kube"
	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"

	"github.com/netcube/netcube/lab/images"
)

// WorkerImage is the image cyclonus runs its pods from in batch mode: the
// agnhost image with cyclonus's worker as /worker (images.CyclonusWorker;
// cyclonus names it, the sandbox imports it under that name).
const WorkerImage = images.CyclonusWorkerRef

// NotRunTags are the cyclonus tags of cases that cannot run here, with why.
var NotRunTags = map[string]string{
	generator.TagSCTPProtocol: "this machine's kernel has no SCTP (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails with EPROTONOSUPPORT): no pod can serve or dial it. " +
		"These cases run as packets through the datapath's programs in TestCyclonusOracle (pkg/cubes/policy), and pass there",
}

// Options of a run.
type Options struct {
	// Kubeconfig of the cluster (the process must reach its API server
	// and kubelets' exec streams: run inside the sandbox's underlay).
	Kubeconfig string
	// Smoke runs only the fast subset `make test` runs (Smoke).
	Smoke bool
	// Match, if set, runs only the cases whose description contains it.
	Match string
	// Wait after each step's changes before probing (cyclonus's
	// perturbation wait; netcube enforces within milliseconds of the
	// event, so a second is generous).
	Wait time.Duration
	// ProbeMode is how probes address their target: "pod-ip" or
	// "service-name" (cyclonus's default: through each pod's Service, so
	// Service traffic is judged after load balancing; slow, since a pod
	// whose egress a case denies waits out its DNS timeouts).
	ProbeMode string
	// Retries: probes of a step that differ from the matcher are run
	// again up to this many times (cyclonus's default is 1); a case
	// passes on the last try's answers.
	Retries int
	Log     io.Writer
}

// Run runs the generated cases against the cluster.
func Run(o Options) (*Report, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	logrus.SetOutput(io.Discard) // cyclonus logs every probe; the report holds what matters
	if err := os.Setenv("KUBECONFIG", o.Kubeconfig); err != nil {
		return nil, err
	}
	k, err := kube.NewKubernetesForContext("")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	namespaces, pods := []string{"x", "y", "z"}, []string{"a", "b", "c"}
	fmt.Fprintf(o.Log, "netpol: creating namespaces %v with pods %v (ports 80, 81 over TCP and UDP)\n", namespaces, pods)
	resources, err := probe.NewDefaultResources(k, namespaces, pods, []int{80, 81},
		[]v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP}, nil, 300, true, "registry.k8s.io")
	if err != nil {
		return nil, fmt.Errorf("cyclonus's pods: %w", err)
	}
	xa, err := resources.GetPod("x", "a")
	if err != nil {
		return nil, err
	}
	all := generator.NewTestCaseGenerator(true, xa.IP, namespaces, nil, nil).GenerateTestCases()
	rep := &Report{Generated: len(all)}
	var run []*generator.TestCase
	for _, c := range all {
		if tag := notRunTag(c); tag != "" {
			rep.NotRun = append(rep.NotRun, NotRun{Description: c.Description, Tag: tag})
			continue
		}
		if o.Match != "" && !strings.Contains(c.Description, o.Match) {
			continue
		}
		run = append(run, c)
	}
	if o.Smoke {
		if run, err = Smoke(run); err != nil {
			return nil, err
		}
	}
	if o.ProbeMode != "" {
		mode, err := generator.ParseProbeMode(o.ProbeMode)
		if err != nil {
			return nil, err
		}
		for _, c := range run {
			withProbeMode(c, mode)
		}
	}
	interpreter := connectivity.NewInterpreter(conflictRetrying{k}, resources, &connectivity.InterpreterConfig{
		ResetClusterBeforeTestCase: true, KubeProbeRetries: o.Retries, PerturbationWaitSeconds: int(o.Wait.Round(time.Second) / time.Second),
		BatchJobs: true, IgnoreLoopback: true, JobTimeoutSeconds: 1,
	})
	for i, c := range run {
		t0 := time.Now()
		r := interpreter.ExecuteTestCase(c)
		res := caseResult(r, time.Since(t0))
		rep.Cases = append(rep.Cases, res)
		state := "passed"
		if !res.Passed {
			state = "FAILED"
		}
		fmt.Fprintf(o.Log, "netpol: [%d/%d] %s %s (%d steps, %s)\n", i+1, len(run), state, c.Description, res.Steps, res.Duration().Round(100*time.Millisecond))
		if res.Err != "" {
			fmt.Fprintf(o.Log, "  error: %s\n", res.Err)
		}
	}
	rep.Wall = time.Since(start)
	return rep, nil
}

// withProbeMode makes every step of c probe in mode (the generator's
// probe configurations are shared: each step gets its own copy).
func withProbeMode(c *generator.TestCase, mode generator.ProbeMode) {
	for _, step := range c.Steps {
		p := *step.Probe
		p.Mode = mode
		step.Probe = &p
	}
}

func notRunTag(c *generator.TestCase) string {
	for tag := range NotRunTags {
		if c.Tags[tag] {
			return tag
		}
	}
	return ""
}

// caseResult keeps what the report needs of cyclonus's result.
func caseResult(r *connectivity.Result, took time.Duration) Case {
	c := Case{Description: r.TestCase.Description, Tags: map[string][]string{}, Seconds: took.Seconds(), Steps: len(r.Steps)}
	for primary, subs := range r.TestCase.Tags.GroupTags() {
		c.Tags[primary] = slices.Sorted(slices.Values(subs))
	}
	if r.Err != nil {
		c.Err = r.Err.Error()
		return c
	}
	c.Passed = len(r.Steps) == len(r.TestCase.Steps)
	for i, s := range r.Steps {
		for proto, counts := range s.LastComparison().ValueCountsByProtocol(true) {
			c.Probes = append(c.Probes, ProbeCount{Step: i + 1, Protocol: string(proto),
				Agree: counts[connectivity.SameComparison], Differ: counts[connectivity.DifferentComparison]})
		}
		c.Tries += len(s.KubeProbes)
		if !s.Passed(true) {
			c.Passed = false
			c.Failure += fmt.Sprintf("step %d (after %d tries): live (left) vs cyclonus's matcher\n%s", i+1, len(s.KubeProbes),
				s.LastComparison().RenderSuccessTable())
		}
	}
	slices.SortFunc(c.Probes, func(a, b ProbeCount) int {
		if a.Step != b.Step {
			return a.Step - b.Step
		}
		return strings.Compare(a.Protocol, b.Protocol)
	})
	return c
}
