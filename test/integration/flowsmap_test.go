package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/cmd/netcube/flows"
	"github.com/netcube/netcube/internal/headless"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
)

// TestFlowsMapDrawsTheTrafficMade: `netcube flows map` against a node's
// real Hubble socket draws the traffic the test made there: the client's
// connections to the echo Service (the positive control, no drop on
// it), then, once a NetworkPolicy isolates the echo pod of the client's
// node, the client's dropped connections to it with Hubble's reason and
// the policy; its page, rendered by chromium (as written by -o html and
// as served by --serve), shows them.
func TestFlowsMapDrawsTheTrafficMade(t *testing.T) {
	// --monitor-trace: the Service's translations are flows that name it.
	sb := upWith(t, "flowmap", sandbox.Config{AgentArgs: []string{"--monitor-trace"}})
	top := sb.Topology
	client := top.ClientPod()
	node, _ := top.Node(client.Node)
	var local sandbox.Pod // the echo pod of the client's node: its drops are this node's flows
	for _, p := range top.EchoBackends() {
		if p.Node == client.Node {
			local = p
		}
	}
	if local.Name == "" {
		t.Fatalf("no echo pod on %s", client.Node)
	}
	server := "unix://" + top.HubbleSocket(node)
	netcube := filepath.Join(binDir, "netcube")
	flowsMap := func(args ...string) []byte {
		t.Helper()
		args = append([]string{"flows", "map", "--server", server}, args...)
		out, err := exec.Command(netcube, args...).Output()
		if err != nil {
			t.Fatalf("netcube %s: %v\n%s", strings.Join(args, " "), err, stderrOf(err))
		}
		return out
	}
	graph := func() flows.Graph {
		t.Helper()
		var g flows.Graph
		if err := json.Unmarshal(flowsMap("-o", "json", "--since", "5m"), &g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	edge := func(g flows.Graph, from, to string) (flows.Edge, bool) {
		for _, e := range g.Edges {
			if e.From == from && e.To == to {
				return e, true
			}
		}
		return flows.Edge{}, false
	}
	const clientNode, echoService, echoPods = "workload:default/client", "service:default/echo", "workload:default/echo"

	// Positive control: the client's connections to the echo Service, answered.
	svc := net.JoinHostPort(sandbox.EchoIPs[0], "80")
	for _, r := range requests(t, sb, "tcp", svc, 4) {
		if r.Err != "" {
			t.Fatalf("positive control: %s: %s", svc, r.Err)
		}
	}
	var g flows.Graph
	testenv.WaitFor(t, 10*time.Second, "the client's edge to the echo Service in netcube flows map", func() bool {
		g = graph()
		e, ok := edge(g, clientNode, echoService)
		return ok && e.Forwarded >= 4
	})
	if e, _ := edge(g, clientNode, echoService); e.Dropped != 0 || !contains(e.Ports, "TCP/80") {
		t.Errorf("the client's edge to the echo Service: %+v, want no drops, TCP/80", e)
	}
	for _, e := range g.Edges {
		if e.Dropped != 0 {
			t.Fatalf("a drop drawn before any traffic was dropped: %+v", e)
		}
	}

	// The echo pod of this node admits app=other only: the client is denied.
	if err := top.WriteManifest("policy.yaml", fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-other, namespace: default}
spec:
  podSelector: {matchLabels: {pod: %s}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: other}}}]
`, local.Name)); err != nil {
		t.Fatal(err)
	}
	direct := net.JoinHostPort(local.IP4.String(), fmt.Sprint(sandbox.PodPort))
	testenv.WaitFor(t, 10*time.Second, "the policy enforced", func() bool {
		return requests(t, sb, "tcp", direct, 1, "--timeout", "300ms")[0].Err != ""
	})
	requests(t, sb, "tcp", direct, 2, "--timeout", "300ms")
	var denied flows.Edge
	testenv.WaitFor(t, 10*time.Second, "the client's dropped edge to the echo pods in netcube flows map", func() bool {
		g = graph()
		denied, _ = edge(g, clientNode, echoPods)
		return denied.DropReasons["POLICY_DENIED"] >= 2
	})
	if !contains(denied.DeniedBy, "default/only-other (NetworkPolicy)") || !contains(denied.Ports, fmt.Sprintf("TCP/%d", sandbox.PodPort)) {
		t.Errorf("the dropped edge %+v names not the policy default/only-other, or not its port", denied)
	}
	svcEdge, _ := edge(g, clientNode, echoService)
	t.Logf("the client's edges: to the echo Service %+v; to the echo pods %+v (%d nodes, %d edges in all)", svcEdge, denied, len(g.Nodes), len(g.Edges))
	var echoNode flows.Node
	for _, n := range g.Nodes {
		if n.ID == echoPods {
			echoNode = n
		}
	}
	if !contains(echoNode.Pods, "default/"+local.Name) {
		t.Errorf("the echo workload %+v has not the pod %s", echoNode, local.Name)
	}

	if !headless.Installed() {
		t.Skip(headless.ErrNotInstalled)
	}
	// The page, written and then drawn by a real browser.
	file := filepath.Join(t.TempDir(), "map.html")
	if err := os.WriteFile(file, flowsMap("-o", "html", "--since", "5m"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkPage(t, "file://"+file, len(g.Nodes), len(g.Edges))

	// The page served, as a browser loads it.
	cmd := exec.Command(netcube, "flows", "map", "--server", server, "--serve", "127.0.0.1:0", "--since", "5m")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Errorf("netcube flows map --serve, interrupted: %v", err)
		}
	})
	served := regexp.MustCompile(`at (http://127\.0\.0\.1:[0-9]+/)`)
	lines := bufio.NewScanner(stderr)
	var url string
	for url == "" && lines.Scan() {
		if m := served.FindStringSubmatch(lines.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatal("netcube flows map --serve told no address")
	}
	go func() { // drain: the server's log must not block it
		for lines.Scan() {
		}
	}()
	checkPage(t, url, len(g.Nodes), len(g.Edges))
}

// checkPage renders a flows map page in chromium and checks what it
// shows: the workloads, the Service edge's count, the drop's reason, and
// the SVG's nodes and edges (at least the graph's: flows may come between).
func checkPage(t *testing.T, url string, nodes, edges int) {
	t.Helper()
	dom, err := headless.DOM(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	text := headless.Text(dom)
	for _, want := range []string{"default/client", "default/echo", "forwarded", "POLICY_DENIED", "default/only-other (NetworkPolicy)"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s as chromium renders it shows no %q:\n%s", url, want, dom)
		}
	}
	n, e, rows := headless.Elements(dom, "g", "node"), headless.Elements(dom, "g", "edge"), headless.Elements(dom, "tr", "edge")+headless.Elements(dom, "tr", "edge dropped")
	t.Logf("%s as chromium renders it: %d nodes, %d edges, %d rows", url, n, e, rows)
	if n < nodes || e < edges || rows != e {
		t.Errorf("%s as chromium renders it: %d nodes, %d edges, %d rows of edges; want at least %d nodes and %d edges, a row each", url, n, e, rows, nodes, edges)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
