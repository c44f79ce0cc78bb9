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
	"sync"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/events"
)

// watcher runs `netcube monitor -o json` against a node's agent for the
// rest of the test, keeping every event it prints.
type watcher struct {
	mu     sync.Mutex
	events []events.Event
}

func watch(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, args ...string) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "netcube"),
		append([]string{"monitor", "-o", "json", "--socket", sb.Topology.APISocket(node)}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &watcher{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e events.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("netcube monitor printed %q: %v", sc.Text(), err)
				continue
			}
			w.mu.Lock()
			w.events = append(w.events, e)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("netcube monitor on %s: stderr:\n%s", node.Name, stderr.String())
		}
	})
	testenv.WaitFor(t, 10*time.Second, "netcube monitor listening on "+node.Name, func() bool {
		return strings.Contains(stderr.String(), "Listening for events")
	})
	return w
}

// find returns the events that match.
func (w *watcher) find(match func(events.Event) bool) []events.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []events.Event
	for _, e := range w.events {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

func (w *watcher) all() []events.Event { return w.find(func(events.Event) bool { return true }) }

// dropsMetric reads netcube_drops_total of one reason from a node's agent.
func dropsMetric(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, reason, cube string) string {
	t.Helper()
	out, err := sb.Output(node.Name, "curl", "-s", "127.0.0.1:10249/metrics")
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf(`netcube_drops_total{cube=%q,reason=%q} `, cube, reason)
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	t.Fatalf("no %s… in the metrics of %s", prefix, node.Name)
	return ""
}

// TestMonitorShowsDrops: drops caused with real traffic are seen in
// `netcube monitor` (with its filters) and in netcube_drops_total, on the
// node that dropped them, on both Service paths: a Service without
// endpoints refuses (at the socket with socket-LB, in from_pod without);
// a NetworkPolicy denies a pod's packets on the receiving node. Before
// each, the same client reaches what it is allowed to, and no drop of
// that traffic is reported (the positive controls).
func TestMonitorShowsDrops(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			sb := up(t, path.socketLB)
			top := sb.Topology
			clientNode := top.Nodes[0]
			echo := top.EchoBackends()[len(top.EchoBackends())-1] // another node than the client's
			echoNode, _ := top.Node(echo.Node)
			client := watch(t, sb, clientNode)
			server := watch(t, sb, echoNode, "--type", "drop")

			// Positive control: the echo Service and the echo pod answer.
			svc := net.JoinHostPort(sandbox.EchoIPs[0], "80")
			direct := net.JoinHostPort(echo.IP4.String(), fmt.Sprint(sandbox.PodPort))
			for _, addr := range []string{svc, direct} {
				for _, r := range requests(t, sb, "tcp", addr, 3) {
					if r.Err != "" {
						t.Fatalf("positive control: %s: %s", addr, r.Err)
					}
				}
			}
			time.Sleep(300 * time.Millisecond)
			for _, w := range []*watcher{client, server} {
				if d := w.find(func(e events.Event) bool { return e.Type == "drop" }); len(d) != 0 {
					t.Fatalf("drops reported for traffic that passed: %v", d)
				}
			}

			hubbleStatus(t, sb, clientNode)
			if got := observe(t, sb, clientNode, "--verdict", "DROPPED"); len(got) != 0 {
				t.Fatalf("hubble observe --verdict DROPPED: %v before any drop", got)
			}

			// No endpoints: refused, and reported where it was refused.
			empty := net.JoinHostPort(sandbox.EmptyIPs[0], "80")
			for _, r := range requests(t, sb, "tcp", empty, 2) {
				refusedFast(t, r)
			}
			point := "from-pod"
			if path.socketLB {
				point = "socket"
			}
			testenv.WaitFor(t, 5*time.Second, "no-endpoints drops in netcube monitor on "+clientNode.Name, func() bool {
				return len(client.find(func(e events.Event) bool {
					return e.Drop == "no-endpoints" && e.Cube == "lb" && e.Dst.String() == empty && e.Point == point && e.Proto == "TCP" &&
						e.Src.Addr() == top.ClientPod().IP4
				})) >= 2
			})
			seen := observe(t, sb, clientNode, "--verdict", "DROPPED", "--to-service", "default/empty", "--protocol", "tcp")
			if len(seen) < 2 {
				t.Errorf("hubble observe --verdict DROPPED --to-service default/empty: %d flows, want 2", len(seen))
			}
			for _, r := range seen {
				f := r.GetFlow()
				// At the socket (socket-LB) the pod is named by its
				// socket's network namespace.
				if f.GetDropReasonDesc().String() != "SERVICE_BACKEND_NOT_FOUND" || f.GetIP().GetDestination() != sandbox.EmptyIPs[0] ||
					f.GetSource().GetPodName() != top.ClientPod().Name || r.GetNodeName() != clientNode.Name {
					t.Errorf("hubble flow %v, want a SERVICE_BACKEND_NOT_FOUND drop from pod %s to %s on %s", f, top.ClientPod().Name, sandbox.EmptyIPs[0], clientNode.Name)
				}
			}
			if got := observe(t, sb, clientNode, "--verdict", "DROPPED", "--protocol", "udp"); len(got) != 0 {
				t.Errorf("hubble observe --protocol udp: %d flows of TCP drops", len(got))
			}
			if v := dropsMetric(t, sb, clientNode, "no-endpoints", "lb"); v == "0" {
				t.Errorf("netcube_drops_total{reason=no-endpoints} on %s is 0", clientNode.Name)
			}

			// A NetworkPolicy that admits only app=other to the echo pods.
			policy := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: other}}}]
`
			if err := top.WriteManifest("policy.yaml", policy); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 10*time.Second, "the policy enforced", func() bool {
				r := requests(t, sb, "tcp", direct, 1, "--timeout", "300ms")
				return r[0].Err != ""
			})
			clientIP := top.ClientPod().IP4
			testenv.WaitFor(t, 5*time.Second, "policy drops in netcube monitor on "+echoNode.Name, func() bool {
				return len(server.find(func(e events.Event) bool {
					return e.Drop == "policy-denied-ingress" && e.Cube == "policy" && e.Src.Addr() == clientIP &&
						e.Dst.String() == direct && e.Policy != nil && e.Policy.Direction == "ingress"
				})) > 0
			})
			if v := dropsMetric(t, sb, echoNode, "policy-denied-ingress", "policy"); v == "0" {
				t.Errorf("netcube_drops_total{reason=policy-denied-ingress} on %s is 0", echoNode.Name)
			}
			denied := observe(t, sb, echoNode, "--verdict", "DROPPED", "--pod", "default/"+echo.Name)
			if len(denied) == 0 {
				t.Errorf("hubble observe --verdict DROPPED --pod default/%s on %s: nothing", echo.Name, echoNode.Name)
			}
			for _, r := range denied {
				f := r.GetFlow()
				if f.GetDropReasonDesc().String() != "POLICY_DENIED" || f.GetDestination().GetPodName() != echo.Name ||
					f.GetSource().GetPodName() != top.ClientPod().Name || f.GetTrafficDirection().String() != "INGRESS" ||
					!strings.Contains(strings.Join(f.GetDestination().GetLabels(), " "), "k8s:app=echo") {
					t.Errorf("hubble flow %v, want a POLICY_DENIED ingress drop from %s to %s", f, top.ClientPod().Name, echo.Name)
				}
			}
			if got := observe(t, sb, echoNode, "--verdict", "DROPPED", "--namespace", "kube-system"); len(got) != 0 {
				t.Errorf("hubble observe --namespace kube-system: %d flows of pods in default", len(got))
			}
			hubbleStatus(t, sb, echoNode)

			// --type drop: nothing else reached that monitor.
			if other := server.find(func(e events.Event) bool { return e.Type != "drop" }); len(other) != 0 {
				t.Errorf("netcube monitor --type drop printed %v", other)
			}
			if len(server.all()) == 0 {
				t.Error("no events at all on the server's node")
			}
			dashboardNamesExportedMetrics(t, sb, echoNode)
		})
	}
}

// dashboardNamesExportedMetrics: every metric the example Grafana
// dashboard (deploy/grafana) queries is one the node's agent exports.
func dashboardNamesExportedMetrics(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "netcube-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	out, err := sb.Output(node.Name, "curl", "-s", "127.0.0.1:10249/metrics")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			exported[f[2]] = true
		}
	}
	metric := regexp.MustCompile(`netcube_[a-z0-9_]+`)
	n := 0
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metric.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no netcube metric", p.Title, tg.Expr)
			}
			for _, name := range names {
				n++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !exported[name] && !exported[base] {
					t.Errorf("panel %q queries %s, which the agent on %s does not export", p.Title, name, node.Name)
				}
			}
		}
	}
	if n == 0 {
		t.Error("the dashboard queries nothing")
	}
}
