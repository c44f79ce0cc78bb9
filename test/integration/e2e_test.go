package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/netcube/netcube/internal/cgroup"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/e2e"
	"github.com/netcube/netcube/lab/images"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestUpstreamSigNetworkSmoke: the fast subset of Kubernetes' own
// sig-network e2e tests (e2e.Smoke: Services of each kind, affinity,
// hairpin, pod and node connectivity, EndpointSlices, DNS, the API
// server's proxy, NetworkPolicy) pass on real nodes, and so do a
// NetworkPolicy probed over IPv4 and IPv6 (checkPolicy), cyclonus's subset
// (checkCyclonus) and the ClusterNetworkPolicy suite's
// (checkClusterNetworkPolicy): kubelet and containerd on each,
// netcube installed by its Helm chart (the agent image imported, its
// DaemonSet started by kubelet, its CNI plugin and config written onto
// the nodes), CoreDNS reached through a Service netcube programs. Every
// smoke test must be found (a renamed upstream test fails here, not
// silently), and the sandbox must leave nothing behind.
func TestUpstreamSigNetworkSmoke(t *testing.T) {
	testenv.RequireRoot(t)
	e2eDir, err := kubeenv.E2EDir()
	if err != nil {
		t.Fatal(err)
	}
	toolsDir, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	// The agent image holds static builds; cyclonus's worker image (for
	// its NetworkPolicy cases) its worker.
	for _, args := range [][]string{
		{"-o", filepath.Join(binDir, "static") + "/", "github.com/netcube/netcube/cmd/netcube-agent", "github.com/netcube/netcube/cmd/netcube-cni", "github.com/netcube/netcube/cmd/netcube-operator", "github.com/netcube/netcube/cmd/netcube"},
		{"-o", filepath.Join(binDir, "static", "cyclonus-worker"), "github.com/mattfenwick/cyclonus/cmd/worker"},
	} {
		build := exec.Command("go", append([]string{"build"}, args...)...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("static build: %v\n%s", err, out)
		}
	}
	_, file, _, _ := runtime.Caller(0)
	chart := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "helm", "netcube")
	sb := upWith(t, "te", sandbox.Config{Kubelet: true, SocketLB: true, E2EDir: e2eDir, ToolsDir: toolsDir, Chart: chart})

	rep, err := e2e.Run(e2e.Options{Sandbox: sb, Focus: e2e.SmokeFocus(), Skip: e2e.SkipPattern(),
		Procs: 6, Dir: t.TempDir(), Log: testenv.LogWriter(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range e2e.Smoke {
		re := regexp.MustCompile(regexp.QuoteMeta(name))
		ran := false
		for _, s := range rep.Specs {
			ran = ran || (re.MatchString(s.Name) && s.State == "passed")
		}
		if !ran {
			t.Errorf("smoke test %q did not run and pass", name)
		}
	}
	for _, s := range rep.Failed() {
		t.Errorf("FAILED %s: %s", s.Name, s.Failure)
	}
	c := rep.Count(func(e2e.Spec) bool { return true })
	t.Logf("upstream sig-network smoke: %d passed, %d failed, %d skipped in %s", c.Passed, c.Failed, c.Skipped, rep.Wall)

	// NetworkPolicy with IPv6 too (the upstream tests probe one family).
	list, err := kubeenv.SuiteImages(e2eDir)
	if err != nil {
		t.Fatal(err)
	}
	agnhost := images.RefsByRepository(list)["registry.k8s.io/e2e-test-images/agnhost"]
	if len(agnhost) == 0 {
		t.Fatal("e2e.test lists no agnhost image")
	}
	t.Run("netcube verbs in the agent's pod", func(t *testing.T) { checkVerbsInAgentPod(t, sb) })
	t.Run("NetworkPolicy IPv4 and IPv6", func(t *testing.T) { checkPolicy(t, sb, agnhost[0]) })
	t.Run("cyclonus subset", func(t *testing.T) { checkCyclonus(t, sb) })
	t.Run("ClusterNetworkPolicy conformance subset", func(t *testing.T) { checkClusterNetworkPolicy(t, sb) })

	// A node whose runtime and kubelet crash is reported down (positive
	// control first: both run), and down after that leaves no process of
	// the sandbox's (containers outlive a killed containerd) and nothing
	// else (upWith's cleanup checks namespaces, pins, cgroups, state).
	if down := sb.NodeDown("node2"); len(down) != 0 {
		t.Fatalf("node2 reported down before any crash: %v", down)
	}
	for _, c := range []string{"containerd", "kubelet"} {
		if err := sb.KillNodeComponent("node2", c); err != nil {
			t.Fatal(err)
		}
	}
	if down := sb.NodeDown("node2"); len(down) != 2 {
		t.Errorf("node2 with containerd and kubelet killed reported down: %v", down)
	}
	if down := sb.NodeDown("node1"); len(down) != 0 {
		t.Errorf("node1 reported down: %v", down)
	}
	pids := cgroup.Procs(sb.Topology.CgroupRoot)
	if len(pids) == 0 {
		t.Fatal("no process in the sandbox's cgroup")
	}
	if err := sandbox.Down(sb.Config.Name, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if sandbox.ProcessAlive(pid) {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("pid %d (%s) outlived sandbox down", pid, strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
}

// checkVerbsInAgentPod runs the operator's verbs as docs/install.md gives
// them for a real cluster, in an agent's pod (the image holds the CLI and
// the chart's paths are its defaults), and the pages' command is the one
// run here.
func checkVerbsInAgentPod(t *testing.T, sb *sandbox.Sandbox) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	const printed = "kubectl -n kube-system exec ds/netcube-agent -- netcube status"
	if !strings.Contains(string(page), printed) {
		t.Errorf("docs/install.md no longer gives %q", printed)
	}
	for verb, want := range map[string]string{"status": "synced", "service list": "default/kubernetes"} {
		cmd, err := sb.Kubectl(append([]string{"-n", "kube-system", "exec", "ds/netcube-agent", "--", "netcube"}, strings.Fields(verb)...)...)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("kubectl exec ds/netcube-agent -- netcube %s: %v, want %q in:\n%s", verb, err, want, out)
		}
	}
}
