package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/netcube/netcube/lab/netpol"
)

// netpolCmd runs cyclonus's generated NetworkPolicy cases against a
// sandbox with real nodes (started for the run unless --reuse) and writes
// the conformance summary.
func netpolCmd(args []string) error {
	if len(args) > 0 && args[0] == "inside" {
		return netpolInside(args[1:])
	}
	fs := flag.NewFlagSet("netpol", flag.ExitOnError)
	smoke := fs.Bool("smoke", false, "only the fast subset `make test` runs (netpol.SmokeCases)")
	match := fs.String("match", "", "only the cases whose description contains this")
	wait := fs.Duration("wait", time.Second, "wait after each step's changes before probing")
	retries := fs.Int("retries", 1, "probe a step that differs from the matcher again, up to this many times")
	mode := fs.String("probe-mode", "pod-ip", "how probes address their target: pod-ip, or service-name (cyclonus's default: through the pods' Services, much slower where a case denies egress, DNS included)")
	report := fs.String("report", "", "write the Markdown summary here (docs/conformance/netpol-cyclonus.md), and the results beside it (.json)")
	out := fs.String("json", "", "write the results here (default: beside --report, or the sandbox's state directory)")
	from := fs.String("from", "", "render --report from the results of an earlier run (its .json) instead of running")
	nodes := addRealNodeFlags(fs, "np")
	_ = fs.Parse(args)

	if *from != "" {
		rep, err := netpol.LoadJSON(*from)
		if err != nil {
			return err
		}
		return writeNetpolReport(*report, rep)
	}
	commit := gitCommit()
	sb, down, err := nodes.realNodeSandbox()
	if err != nil {
		return err
	}
	defer down()
	results := *out
	if results == "" && *report != "" {
		results = strings.TrimSuffix(*report, ".md") + ".json"
	} else if results == "" {
		results = filepath.Join(sb.Topology.StateDir, "netpol.json")
	}
	// cyclonus execs into pods through the API server: it runs where the
	// API server is reachable, the sandbox's underlay.
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	inner := []string{"--net=/run/netns/" + sb.Topology.Underlay, "--", exe, "netpol", "inside",
		"--kubeconfig", sb.Topology.Kubeconfig(), "--json", results, "--wait", wait.String(), fmt.Sprintf("--retries=%d", *retries),
		fmt.Sprintf("--smoke=%v", *smoke), "--match", *match, "--probe-mode", *mode}
	cmd := exec.Command("nsenter", inner...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cyclonus run: %w", err)
	}
	rep, err := netpol.LoadJSON(results)
	if err != nil {
		return err
	}
	rep.Meta = netpol.Meta{
		Commit:  commit,
		Command: "netcube-lab netpol " + strings.Join(args, " "),
		Date:    time.Now().UTC().Format("2006-01-02"),
		Environment: fmt.Sprintf("cyclonus v0.5.6 (its generator, interpreter and matcher, batch probes). %d nodes, each containerd + runc and kubelet v1.36.3; "+
			"kube-apiserver v1.36.3; CoreDNS; netcube installed by its Helm chart (routing %s, socket-LB %v), no kube-proxy. "+
			"Probe mode %s. Perturbation wait %s, %d retries.",
			len(sb.Topology.Nodes), sb.Config.Routing, sb.Config.SocketLB, *mode, *wait, *retries),
	}
	if err := rep.WriteJSON(results); err != nil {
		return err
	}
	t := rep.Totals()
	fmt.Printf("netpol: %d passed, %d failed, %d not run (of %d generated) in %s\n", t.Passed, t.Failed, len(rep.NotRun), rep.Generated, rep.Wall.Round(time.Second))
	if *report != "" {
		if err := writeNetpolReport(*report, rep); err != nil {
			return err
		}
	}
	if t.Failed > 0 {
		return fmt.Errorf("%d cases differ from cyclonus's matcher (results: %s)", t.Failed, results)
	}
	return nil
}

// netpolInside is the run itself, in the sandbox's underlay.
func netpolInside(args []string) error {
	fs := flag.NewFlagSet("netpol inside", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "")
	out := fs.String("json", "", "")
	smoke := fs.Bool("smoke", false, "")
	match := fs.String("match", "", "")
	wait := fs.Duration("wait", time.Second, "")
	retries := fs.Int("retries", 1, "")
	mode := fs.String("probe-mode", "", "")
	_ = fs.Parse(args)
	rep, err := netpol.Run(netpol.Options{Kubeconfig: *kubeconfig, Smoke: *smoke, Match: *match, Wait: *wait, Retries: *retries,
		ProbeMode: *mode, Log: os.Stdout})
	if err != nil {
		return err
	}
	return rep.WriteJSON(*out)
}

func writeNetpolReport(file string, rep *netpol.Report) error {
	if file == "" {
		return fmt.Errorf("--from needs --report")
	}
	var b bytes.Buffer
	if err := netpol.WriteMarkdown(&b, rep); err != nil {
		return err
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("netpol: report %s\n", file)
	return nil
}
