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

	"github.com/netcube/netcube/lab/e2e"
)

// e2eCmd runs the upstream sig-network e2e tests against a sandbox with
// real nodes (started for the run unless --reuse) and writes the
// conformance report.
func e2eCmd(args []string) error {
	fs := flag.NewFlagSet("e2e", flag.ExitOnError)
	smoke := fs.Bool("smoke", false, "only the fast subset `make test` runs")
	focus := fs.String("focus", "", "ginkgo focus (default: every [sig-network] test, or the smoke subset)")
	procs := fs.Int("procs", 6, "parallel test processes (serial tests run alone at the end)")
	dir := fs.String("dir", "", "ginkgo reports and logs (default: the sandbox's state directory)")
	report := fs.String("report", "", "write the Markdown conformance report here (docs/conformance/sig-network.md), and the results beside it (.json)")
	from := fs.String("from", "", "render --report from the results of an earlier run (its .json) instead of running")
	nodes := addRealNodeFlags(fs, "e2e")
	_ = fs.Parse(args)

	if *from != "" {
		rep, err := e2e.LoadJSON(*from)
		if err != nil {
			return err
		}
		return writeReport(*report, rep, rep.Meta)
	}
	commit := gitCommit() // what is measured: the tree at the start
	sb, down, err := nodes.realNodeSandbox()
	if err != nil {
		return err
	}
	defer down()
	o := e2e.Options{Sandbox: sb, Focus: *focus, Skip: e2e.SkipPattern(), Procs: *procs, Dir: *dir, Log: os.Stdout}
	if o.Focus == "" {
		o.Focus = e2e.Focus
		if *smoke {
			o.Focus = e2e.SmokeFocus()
		}
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(sb.Topology.StateDir, "e2e")
	}
	fmt.Printf("e2e: running %s with %d processes (log: %s)\n", o.Focus, o.Procs, filepath.Join(o.Dir, "e2e.log"))
	rep, err := e2e.Run(o)
	if err != nil {
		return err
	}
	rest := rep.Count(func(s e2e.Spec) bool { return !e2e.IsNetworkPolicy(s.Name) })
	np := rep.Count(func(s e2e.Spec) bool { return e2e.IsNetworkPolicy(s.Name) })
	fmt.Printf("e2e: %s wall; all but NetworkPolicy: %d passed, %d failed, %d skipped (%.1f%%); NetworkPolicy: %d passed, %d failed, %d skipped\n",
		rep.Wall.Round(time.Second), rest.Passed, rest.Failed, rest.Skipped, 100*rest.PassRate(), np.Passed, np.Failed, np.Skipped)
	for _, s := range rep.Failed() {
		fmt.Printf("  FAILED %s\n    %s\n", s.Name, s.Failure)
	}
	rep.Meta = e2e.Meta{
		Commit:      commit,
		Command:     "netcube-lab e2e " + strings.Join(args, " "),
		Kubernetes:  "v1.36.3",
		Environment: fmt.Sprintf("%d nodes, each containerd 1.6.20 (Debian) + runc and kubelet v1.36.3 in its own network, mount and UTS namespace; kube-apiserver, kube-controller-manager, kube-scheduler v1.36.3; CoreDNS v1.15.0; netcube installed by its Helm chart (routing %s, socket-LB %v), no kube-proxy", len(sb.Topology.Nodes), sb.Config.Routing, sb.Config.SocketLB),
	}
	if *report != "" {
		if err := rep.WriteJSON(strings.TrimSuffix(*report, ".md") + ".json"); err != nil {
			return err
		}
		if err := writeReport(*report, rep, rep.Meta); err != nil {
			return err
		}
	}
	if *smoke && len(rep.Failed()) > 0 {
		return fmt.Errorf("%d smoke tests failed", len(rep.Failed()))
	}
	return nil
}

func writeReport(file string, rep *e2e.Report, m e2e.Meta) error {
	if file == "" {
		return fmt.Errorf("--from needs --report")
	}
	m.Explanations = e2e.Explanations
	var b bytes.Buffer
	if err := e2e.WriteMarkdown(&b, rep, m); err != nil {
		return err
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Printf("e2e: report %s\n", file)
	return nil
}

// gitCommit names the commit of the working tree ("+dirty" with
// uncommitted changes).
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		commit += "+dirty"
	}
	return commit
}
