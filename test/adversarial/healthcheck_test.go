package adversarial

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
)

// localService renders an IPv4 LoadBalancer Service with
// externalTrafficPolicy Local (so a health-check node port, hcPort, when
// not 0) and its EndpointSlice of pods.
func localService(name, clusterIP string, nodePort, hcPort int, pods []sandbox.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n", name)
	fmt.Fprintf(&b, "  type: LoadBalancer\n  externalTrafficPolicy: Local\n  ipFamilies: [IPv4]\n  clusterIP: %s\n  clusterIPs: [%s]\n", clusterIP, clusterIP)
	if hcPort != 0 {
		fmt.Fprintf(&b, "  healthCheckNodePort: %d\n", hcPort)
	}
	fmt.Fprintf(&b, "  ports:\n  - {name: http, port: 80, protocol: TCP, targetPort: http, nodePort: %d}\n", nodePort)
	return b.String() + "---\n" + sandbox.SliceYAML(name, false, sandbox.EndpointPorts[:1], pods)
}

// healthAnswer asks node's health-check port from the host outside the
// cluster, as a load balancer does, and returns the HTTP status and the
// local endpoint count ("" status: no answer within timeout).
func healthAnswer(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, port int, timeout time.Duration) (status string, local int) {
	t.Helper()
	url := "http://" + net.JoinHostPort(node.IP4.String(), strconv.Itoa(port)) + "/"
	out, _ := sb.Output(sb.Topology.External.Name, "curl", "-s", "-m", fmt.Sprint(timeout.Seconds()), "-w", " %{http_code}", url)
	text := strings.TrimSpace(string(out))
	i := strings.LastIndex(text, " ")
	var body struct{ LocalEndpoints int }
	if i < 0 || json.Unmarshal([]byte(text[:i]), &body) != nil {
		return "", 0
	}
	return text[i+1:], body.LocalEndpoints
}

// slowloris starts netcube-lab pod slowloris in who against addr and
// returns once every connection was tried; the returned function waits
// for its report. It is killed after the test.
func slowloris(t *testing.T, sb *sandbox.Sandbox, who, addr string, conns int, d time.Duration) func() traffic.SlowReport {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, sandbox.LabBinary), "pod", "slowloris", "--conns", fmt.Sprint(conns), "--for", d.String(), addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := sb.Start(who, cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	var r traffic.SlowReport
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &r) != nil || r.Event != "holding" {
		t.Fatalf("slowloris in %s did not start: %s", who, stderr.String())
	}
	t.Logf("slowloris against %s: %+v", addr, r)
	if r.Opened == 0 {
		t.Fatalf("slowloris against %s opened no connection: %+v", addr, r)
	}
	return func() traffic.SlowReport {
		t.Helper()
		var done traffic.SlowReport
		if !sc.Scan() || json.Unmarshal(sc.Bytes(), &done) != nil {
			t.Fatalf("slowloris in %s: no report (%s)", who, stderr.String())
		}
		return done
	}
}

// TestHealthCheckPortsWithstandSlowClients: slow clients (slowloris, from
// a pod of another node) holding a node's health-check ports open do not
// stop the node's Service programming nor its health checks. While they
// hold both Services' ports, one Service's port changes and a new Service
// is created: the new Service, and one written after the change, are
// served within seconds, the moved port answers (the one it left does
// not), the port still under attack answers a new client (its
// connections are capped and cut after the read timeout), and the
// attackers' connections were cut by the server.
func TestHealthCheckPortsWithstandSlowClients(t *testing.T) {
	sb := up(t, "hc", sandbox.Config{})
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	pods := top.EchoBackends()
	var local1 int
	for _, p := range pods {
		if p.Node == node1.Name {
			local1++
		}
	}
	client := node2.Pods[0].Name // the pods reach the Services; the attacker is one too
	const moving, steady, movedTo = 31120, 31121, 31122
	base := localService("moving", "10.96.0.50", 30120, moving, pods) + "---\n" +
		localService("steady", "10.96.0.51", 30121, steady, pods)
	if err := top.WriteManifest("healthcheck.yaml", base); err != nil {
		t.Fatal(err)
	}
	// Positive control: both ports answer a load balancer's probe.
	for _, port := range []int{moving, steady} {
		testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("health-check port %d", port), func() bool {
			st, n := healthAnswer(t, sb, node1, port, time.Second)
			return st == "200" && n == local1
		})
	}
	// The attack: more connections to each port than one address serves.
	attackers := []func() traffic.SlowReport{
		slowloris(t, sb, client, net.JoinHostPort(node1.IP4.String(), strconv.Itoa(moving)), 100, 8*time.Second),
		slowloris(t, sb, client, net.JoinHostPort(node1.IP4.String(), strconv.Itoa(steady)), 100, 8*time.Second),
	}
	// Under it, the moving Service's port changes and a new Service comes.
	changed := localService("moving", "10.96.0.50", 30120, movedTo, pods) + "---\n" +
		localService("steady", "10.96.0.51", 30121, steady, pods) + "---\n" +
		sandbox.ServiceYAML("fresh", []string{"10.96.0.52"}, sandbox.EchoPorts[:1]) + "---\n" +
		sandbox.SliceYAML("fresh", false, sandbox.EndpointPorts[:1], pods)
	changedAt := time.Now()
	if err := top.WriteManifest("healthcheck.yaml", changed); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "the new Service served on node2 (the attacker's) under the attack", func() bool {
		return request(t, sb, client, "tcp", "10.96.0.52:80", 1, "--timeout", "300ms")[0].Err == ""
	})
	testenv.WaitFor(t, 5*time.Second, "the new Service served on node1 (the attacked) under the attack", func() bool {
		return request(t, sb, node1.Pods[0].Name, "tcp", "10.96.0.52:80", 1, "--timeout", "300ms")[0].Err == ""
	})
	t.Logf("the new Service served on both nodes %v after it was written", time.Since(changedAt).Round(time.Millisecond))
	// And the node goes on programming Services after the port moved: one
	// more, written now, is served on the attacked node too.
	if err := top.WriteManifest("healthcheck.yaml", changed+"---\n"+
		sandbox.ServiceYAML("later", []string{"10.96.0.53"}, sandbox.EchoPorts[:1])+"---\n"+
		sandbox.SliceYAML("later", false, sandbox.EndpointPorts[:1], pods)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "a Service written after the port moved, served on node1 (the attacked)", func() bool {
		return request(t, sb, node1.Pods[0].Name, "tcp", "10.96.0.53:80", 1, "--timeout", "300ms")[0].Err == ""
	})
	testenv.WaitFor(t, 5*time.Second, "the moved health-check port answers", func() bool {
		st, n := healthAnswer(t, sb, node1, movedTo, time.Second)
		return st == "200" && n == local1
	})
	if st, _ := healthAnswer(t, sb, node1, moving, time.Second); st != "" {
		t.Errorf("the health-check port %d the Service left still answers (%s)", moving, st)
	}
	// The steady port is still under attack (100 connections, a cap of
	// 64, each cut after 2 s): a new client is answered, within two read
	// timeouts and change.
	if st, n := healthAnswer(t, sb, node1, steady, 6*time.Second); st != "200" || n != local1 {
		t.Errorf("the attacked port %d answered %q with %d local endpoints, want 200 with %d", steady, st, n, local1)
	}
	for i, wait := range attackers {
		r := wait()
		t.Logf("slowloris %d: %+v", i, r)
		if r.Cut == 0 {
			t.Errorf("slowloris %d: the server cut none of its connections: %+v", i, r)
		}
	}
}
