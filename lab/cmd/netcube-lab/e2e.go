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
	"github.com/netcube/netcube/lab/sandbox"
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
	nodeFlags := addRealNodeFlags(fs, "e2e")
	nodes := fs.Int("nodes", 0, "nodes of the started sandbox, in zones a, b, c in turn (default 6 for the full run: the Traffic Distribution, Topology Hints and 3-node Service tests need three zones, the multi-node Traffic Distribution ones two nodes in each; 2 with --smoke, as make test runs it)")
	_ = fs.Parse(args)
	if *nodes == 0 {
		*nodes = 6
		if *smoke {
			*nodes = 2
		}
	}
	nodeFlags.nodes = nodes

	if *from != "" {
		rep, err := e2e.LoadJSON(*from)
		if err != nil {
			return err
		}
		return writeReport(*report, rep, rep.Meta)
	}
	commit := gitCommit() // what is measured: the tree at the start
	sb, down, err := nodeFlags.realNodeSandbox()
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
	sum := rep.Summarize()
	fmt.Printf("e2e: %s wall; %d selected: %d passed, %d failed, %d skipped by the run, %d skipped themselves; pass rate %.1f%% of those run, %.1f%% of what this machine can run, %.1f%% of everything selected\n",
		rep.Wall.Round(time.Second), sum.Selected, sum.Passed, sum.Failed, sum.Selected-sum.Ran()-sum.SelfSkipped, sum.SelfSkipped,
		100*sum.Rate(sum.Ran()), 100*sum.Rate(sum.Runnable()), 100*sum.Rate(sum.Selected))
	for _, s := range rep.Failed() {
		fmt.Printf("  FAILED %s\n    %s\n", s.Name, s.Failure)
	}
	rep.Meta = e2e.Meta{
		Commit:      commit,
		Command:     "netcube-lab e2e " + strings.Join(args, " "),
		Kubernetes:  "v1.36.3",
		Environment: fmt.Sprintf("%d nodes (in zones %s), each containerd 1.6.20 (Debian) + runc and kubelet v1.36.3 in its own network, mount and UTS namespace; kube-apiserver, kube-controller-manager, kube-scheduler v1.36.3; CoreDNS v1.15.0; netcube installed by its Helm chart (routing %s, socket-LB %v), no kube-proxy%s", len(sb.Topology.Nodes), nodeZones(sb), sb.Config.Routing, sb.Config.SocketLB, racksOf(sb)),
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

// racksOf describes a routed sandbox's racks for the report ("" if flat).
func racksOf(sb *sandbox.Sandbox) string {
	t := sb.Topology
	if !t.Routed() {
		return ""
	}
	racks := make([]string, len(t.Racks))
	for i, k := range t.Racks {
		racks[i] = fmt.Sprintf("%s: %s (%s)", k.Name, strings.Join(k.Nodes, ", "), k.Net4)
	}
	return fmt.Sprintf("; routed: the nodes in %d racks (%s) with no shared L2, behind one router running BIRD 2 (AS %d) that peers with every node's netcube BGP speaker (AS %d): pod CIDRs, LoadBalancer and External IPs reach it by BGP and it spreads a Cluster Service's over every node, a Local one's over the nodes with an endpoint, by ECMP hashing on ports; the e2e client reaches LoadBalancer IPs through that router",
		len(t.Racks), strings.Join(racks, "; "), sandbox.RouterASN, sandbox.NodeASN)
}

// nodeZones lists the sandbox's nodes' zones, in node order.
func nodeZones(sb *sandbox.Sandbox) string {
	zones := make([]string, len(sb.Topology.Nodes))
	for i, n := range sb.Topology.Nodes {
		zones[i] = n.Zone
	}
	return strings.Join(zones, ", ")
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
