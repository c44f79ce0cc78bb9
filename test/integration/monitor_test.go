package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	return metric(t, sb, node, fmt.Sprintf(`netcube_drops_total{cube=%q,reason=%q}`, cube, reason))
}

// metric reads one series (name{labels} as the agent prints it) from a
// node's agent.
func metric(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, series string) string {
	t.Helper()
	out, err := sb.Output(node.Name, "curl", "-s", "127.0.0.1:10249/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("no %s in the metrics of %s", series, node.Name)
	return ""
}

// cubeCounted: netcube_cube_packets_total and _bytes_total of each cube
// moved on node since before (each a packet of at least 40 bytes).
func cubeCounted(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, before map[string][2]float64, cubes ...string) {
	t.Helper()
	now := cubeTraffic(t, sb, node, cubes...)
	for _, c := range cubes {
		dp, db := now[c][0]-before[c][0], now[c][1]-before[c][1]
		if dp <= 0 || db < 40*dp {
			t.Errorf("%s: cube %s counted %.0f packets, %.0f bytes since; want packets of the traffic", node.Name, c, dp, db)
		}
	}
}

// cubeTraffic reads the packets and bytes the cubes counted on node.
func cubeTraffic(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, cubes ...string) map[string][2]float64 {
	t.Helper()
	out := map[string][2]float64{}
	for _, c := range cubes {
		var v [2]float64
		for i, name := range []string{"netcube_cube_packets_total", "netcube_cube_bytes_total"} {
			f, err := strconv.ParseFloat(metric(t, sb, node, fmt.Sprintf(`%s{cube=%q}`, name, c)), 64)
			if err != nil {
				t.Fatal(err)
			}
			v[i] = f
		}
		out[c] = v
	}
	return out
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
			server := watch(t, sb, echoNode, "--type", "drop", "--pod", "default/"+echo.Name)
			// The cubes the traffic below crosses on the client's node:
			// socket-LB translates at connect, the tc path per packet.
			crossed := []string{"router"}
			if !path.socketLB {
				crossed = append(crossed, "lb", "ct", "nat")
			}
			clientCubes := cubeTraffic(t, sb, clientNode, crossed...)

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
			cubeCounted(t, sb, clientNode, clientCubes, crossed...)

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
						e.Src.Addr() == top.ClientPod().IP4 && e.SrcPod == "default/"+top.ClientPod().Name && e.Service == "default/empty"
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

			// NetworkPolicies that admit app=other to the echo pods, and
			// the client over UDP only.
			policy := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: other}}}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo-udp, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{protocol: UDP, port: 8080}]
`
			if err := top.WriteManifest("policy.yaml", policy); err != nil {
				t.Fatal(err)
			}
			echoPolicy := cubeTraffic(t, sb, echoNode, "policy")
			testenv.WaitFor(t, 10*time.Second, "the policy enforced", func() bool {
				r := requests(t, sb, "tcp", direct, 1, "--timeout", "300ms")
				return r[0].Err != ""
			})
			clientIP := top.ClientPod().IP4
			testenv.WaitFor(t, 5*time.Second, "policy drops in netcube monitor on "+echoNode.Name, func() bool {
				return len(server.find(func(e events.Event) bool {
					return e.Drop == "policy-denied-ingress" && e.Cube == "policy" && e.Src.Addr() == clientIP &&
						e.Dst.String() == direct && e.Policy != nil && e.Policy.Direction == "ingress" &&
						slices.Equal(e.Policy.Policies, []string{"default/echo", "default/echo-udp"}) &&
						e.SrcPod == "default/"+top.ClientPod().Name && e.DstPod == "default/"+echo.Name
				})) > 0
			})
			if v := dropsMetric(t, sb, echoNode, "policy-denied-ingress", "policy"); v == "0" {
				t.Errorf("netcube_drops_total{reason=policy-denied-ingress} on %s is 0", echoNode.Name)
			}
			cubeCounted(t, sb, echoNode, echoPolicy, "policy")
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
			// The client's UDP is allowed, by the policy that allows it.
			for _, r := range requests(t, sb, "udp", direct, 2) {
				if r.Err != "" {
					t.Fatalf("UDP to %s, which echo-udp allows: %s", direct, r.Err)
				}
			}
			testenv.WaitFor(t, 5*time.Second, "the allowed verdict named by hubble observe --print-policy-names", func() bool {
				out, err := exec.Command(hubbleCLI(t), "observe", "--server", "unix://"+top.HubbleSocket(echoNode), "--last", "1000",
					"--type", "policy-verdict", "--protocol", "udp", "--print-policy-names").CombinedOutput()
				return err == nil && strings.Contains(string(out), "ALLOWED BY echo-udp (NetworkPolicy)")
			})
			if got := observe(t, sb, echoNode, "--verdict", "DROPPED", "--namespace", "kube-system"); len(got) != 0 {
				t.Errorf("hubble observe --namespace kube-system: %d flows of pods in default", len(got))
			}
			hubbleStatus(t, sb, echoNode)

			// An egress policy of the client: it may reach app=other only;
			// its packets to an echo pod are dropped where it sends them.
			if err := top.WriteManifest("policy.yaml", `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: client, namespace: default}
spec:
  podSelector: {matchLabels: {app: client}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {app: other}}}]
`); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, 10*time.Second, "policy-denied-egress drops in netcube monitor on "+clientNode.Name, func() bool {
				_ = requests(t, sb, "tcp", direct, 1, "--timeout", "200ms")
				return len(client.find(func(e events.Event) bool {
					return e.Drop == "policy-denied-egress" && e.Cube == "policy" && e.Src.Addr() == clientIP &&
						e.Dst.String() == direct && e.Policy != nil && e.Policy.Direction == "egress" &&
						slices.Equal(e.Policy.Policies, []string{"default/client"})
				})) > 0
			})
			if v := dropsMetric(t, sb, clientNode, "policy-denied-egress", "policy"); v == "0" {
				t.Errorf("netcube_drops_total{reason=policy-denied-egress} on %s is 0", clientNode.Name)
			}

			// --type drop --pod: nothing else reached that monitor.
			if other := server.find(func(e events.Event) bool {
				return e.Type != "drop" || (e.SrcPod != "default/"+echo.Name && e.DstPod != "default/"+echo.Name)
			}); len(other) != 0 {
				t.Errorf("netcube monitor --type drop --pod default/%s printed %v", echo.Name, other)
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

// TestMonitorShowsExternalDrops: drops of traffic from outside the
// cluster, caused for real, are seen in netcube monitor, hubble observe
// and netcube_drops_total on the node that dropped them: a client outside
// a LoadBalancer's loadBalancerSourceRanges (after a client within them is
// answered), and a NodePort with externalTrafficPolicy Local on a node
// without a local endpoint (after the node with one answers).
func TestMonitorShowsExternalDrops(t *testing.T) {
	sb := up(t, false)
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	var onNode2 []sandbox.Pod
	for _, p := range top.EchoBackends() {
		if p.Node == node2.Name {
			onNode2 = append(onNode2, p)
		}
	}
	ext := top.External.IP4.String()
	manifests := withSourceRanges(externalService("ranged", "LoadBalancer", "Cluster", []string{"10.96.0.34", "fd00:10:96::34"}, [2]int{30099, 30100},
		nil, []string{"198.51.100.8"}, top.EchoBackends()), ext+"/32") + "---\n" +
		withSourceRanges(externalService("walled", "LoadBalancer", "Cluster", []string{"10.96.0.35", "fd00:10:96::35"}, [2]int{30101, 30102},
			nil, []string{"198.51.100.9"}, top.EchoBackends()), "10.0.0.0/8") + "---\n" +
		externalService("local-node2", "NodePort", "Local", []string{"10.96.0.32", "fd00:10:96::32"}, [2]int{30095, 30096}, nil, nil, onNode2)
	if err := top.WriteManifest("external.yaml", manifests); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"198.51.100.8/32", "198.51.100.9/32"} {
		if err := top.RouteFromExternal(netip.MustParsePrefix(prefix), node1.Name); err != nil {
			t.Fatal(err)
		}
	}
	mon := watch(t, sb, node1, "--type", "drop")
	testenv.WaitFor(t, 10*time.Second, "the LoadBalancer IP within its ranges answered (the positive control)", func() bool {
		return fromOutside(t, sb, "tcp", "198.51.100.8:80", 1, "--timeout", "200ms")[0].Err == ""
	})
	if r := fromOutside(t, sb, "tcp", net.JoinHostPort(node2.IP4.String(), "30095"), 1)[0]; r.Err != "" {
		t.Fatalf("the Local NodePort on the node with an endpoint (the positive control): %s", r.Err)
	}
	if d := mon.find(func(e events.Event) bool { return true }); len(d) != 0 {
		t.Fatalf("drops reported for traffic that was answered: %v", d)
	}

	for _, c := range []struct{ addr, reason string }{
		{"198.51.100.9:80", "source-range"},
		{net.JoinHostPort(node1.IP4.String(), "30095"), "no-local-endpoint"},
	} {
		if r := fromOutside(t, sb, "tcp", c.addr, 1, "--timeout", "300ms")[0]; r.Err == "" {
			t.Errorf("%s answered by %s, want dropped (%s)", c.addr, r.Backend, c.reason)
		}
		testenv.WaitFor(t, 5*time.Second, c.reason+" in netcube monitor on "+node1.Name, func() bool {
			return len(mon.find(func(e events.Event) bool {
				return e.Drop == c.reason && e.Cube == "lb" && e.Point == "from-network" && e.Src.Addr().String() == ext && e.Dst.String() == c.addr
			})) > 0
		})
		if v := dropsMetric(t, sb, node1, c.reason, "lb"); v == "0" {
			t.Errorf("netcube_drops_total{reason=%s} on %s is 0", c.reason, node1.Name)
		}
	}
	want := map[string]string{"198.51.100.9": "DENIED_BY_LB_SRC_RANGE_CHECK", node1.IP4.String(): "SERVICE_BACKEND_NOT_FOUND"}
	seen := observe(t, sb, node1, "--verdict", "DROPPED", "--from-ip", ext)
	for _, r := range seen {
		f := r.GetFlow()
		if w, ok := want[f.GetIP().GetDestination()]; ok && f.GetDropReasonDesc().String() == w {
			delete(want, f.GetIP().GetDestination())
		}
	}
	if len(want) != 0 {
		t.Errorf("hubble observe --verdict DROPPED --from-ip %s on %s lacks %v (saw %d flows)", ext, node1.Name, want, len(seen))
	}
}
