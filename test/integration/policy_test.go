package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/netpol"
	"github.com/netcube/netcube/lab/sandbox"
)

// policyPods: a server on node2, a client and another pod on node1 (so the
// policy is judged across nodes, on the receiving node), all agnhost.
const policyPods = `
apiVersion: v1
kind: Namespace
metadata: {name: netcube-np}
---
apiVersion: v1
kind: Pod
metadata: {name: server, namespace: netcube-np, labels: {app: server}}
spec:
  nodeName: node2
  containers: [{name: c, image: %[1]s, imagePullPolicy: Never, args: [netexec, --http-port=8080, --udp-port=8081], ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: netcube-np, labels: {app: client}}
spec:
  nodeName: node1
  containers: [{name: c, image: %[1]s, imagePullPolicy: Never, args: [pause]}]
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: netcube-np, labels: {app: other}}
spec:
  nodeName: node1
  containers: [{name: c, image: %[1]s, imagePullPolicy: Never, args: [pause]}]
`

// serverPolicy: the server accepts app=client on its named port http, and
// UDP from no one.
const serverPolicy = `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: server, namespace: netcube-np}
spec:
  podSelector: {matchLabels: {app: server}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{port: http}]
`

// checkPolicy enforces a NetworkPolicy on real nodes with real traffic,
// IPv4 and IPv6: every probe connects before the policy (the positive
// control), and after it only what it allows does.
func checkPolicy(t *testing.T, sb *sandbox.Sandbox, agnhost string) {
	kubectl := func(stdin string, args ...string) (string, error) {
		cmd, err := sb.Kubectl(args...)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := kubectl(fmt.Sprintf(policyPods, agnhost), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply pods: %v\n%s", err, out)
	}
	defer kubectl("", "delete", "namespace", "netcube-np", "--wait=false")
	if out, err := kubectl("", "-n", "netcube-np", "wait", "--for=condition=Ready", "pod", "--all", "--timeout=120s"); err != nil {
		t.Fatalf("pods not ready: %v\n%s", err, out)
	}
	out, err := kubectl("", "-n", "netcube-np", "get", "pod", "server", "-o", "jsonpath={.status.podIPs}")
	if err != nil {
		t.Fatal(err)
	}
	var ips []struct{ IP string }
	if err := json.Unmarshal([]byte(out), &ips); err != nil || len(ips) != 2 {
		t.Fatalf("server's pod IPs %q (%v): want IPv4 and IPv6", out, err)
	}
	probe := func(from, ip, port, proto string) bool {
		_, err := kubectl("", "-n", "netcube-np", "exec", from, "--", "/agnhost", "connect",
			net.JoinHostPort(ip, port), "--timeout=2s", "--protocol="+proto)
		return err == nil
	}
	type p struct{ from, port, proto string }
	probes := []p{{"client", "8080", "tcp"}, {"other", "8080", "tcp"}, {"client", "8081", "udp"}}
	for _, ip := range ips {
		for _, pr := range probes {
			if !probe(pr.from, ip.IP, pr.port, pr.proto) {
				t.Fatalf("no policy yet: %s cannot reach %s:%s/%s", pr.from, ip.IP, pr.port, pr.proto)
			}
		}
	}
	if out, err := kubectl(serverPolicy, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply policy: %v\n%s", err, out)
	}
	want := map[p]bool{probes[0]: true, probes[1]: false, probes[2]: false}
	for _, ip := range ips {
		for _, pr := range probes {
			// The agent applies the policy within moments of the API
			// write; give it a few tries.
			var got bool
			for try := 0; try < 10; try++ {
				if got = probe(pr.from, ip.IP, pr.port, pr.proto); got == want[pr] {
					break
				}
				time.Sleep(300 * time.Millisecond)
			}
			if got != want[pr] {
				t.Errorf("with the policy: %s -> %s:%s/%s connected %v, want %v", pr.from, ip.IP, pr.port, pr.proto, got, want[pr])
			}
		}
	}
}

// TestPolicyFromManifests: in manifest mode (no API server) the sandbox's
// pods carry their labels and named ports (pods.yaml), and a
// NetworkPolicy file is enforced with real traffic, IPv4 and IPv6, then
// lifted when the file goes: the client pod (app=client) connects to an
// echo pod before the policy (the positive control); a connection a
// policy allows, held open, goes on until the policy is changed to let
// only app=other reach the echo pods' named port http, which drops it at
// its next packet, and new connections, TCP and UDP, directly and
// through the echo Service (judged after load balancing, on the
// socket-LB path and on the tc path); removing the file lets them
// through again.
func TestPolicyFromManifests(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { policyFromManifests(t, up(t, path.socketLB)) })
	}
}

func policyFromManifests(t *testing.T, sb *sandbox.Sandbox) {
	echo := sb.Topology.EchoBackends()[len(sb.Topology.EchoBackends())-1] // on another node than the client
	targets := []struct{ name, proto, addr string }{
		{"tcp ipv4", "tcp", net.JoinHostPort(echo.IP4.String(), fmt.Sprint(sandbox.PodPort))},
		{"tcp ipv6", "tcp", net.JoinHostPort(echo.IP6.String(), fmt.Sprint(sandbox.PodPort))},
		{"udp ipv4", "udp", net.JoinHostPort(echo.IP4.String(), fmt.Sprint(sandbox.PodPort))},
		{"tcp service", "tcp", net.JoinHostPort(sandbox.EchoIPs[0], "80")},
		{"tcp service ipv6", "tcp", net.JoinHostPort(sandbox.EchoIPs[1], "80")},
	}
	probe := func(proto, addr string) (ok, failed int) {
		for _, r := range requests(t, sb, proto, addr, 4, "--timeout", "300ms") {
			if r.Err == "" {
				ok++
			} else {
				failed++
			}
		}
		return ok, failed
	}
	for _, tg := range targets {
		if ok, failed := probe(tg.proto, tg.addr); failed != 0 {
			t.Fatalf("no policy: %s %s: %d of %d failed", tg.name, tg.addr, failed, ok+failed)
		}
	}
	// First a policy allowing the client on TCP http only (enforced: its
	// UDP is dropped), and a connection it allows, kept open: it goes on
	// while the policy allows it.
	allowClient := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: client}}}]
    ports: [{port: http}]
`
	if err := sb.Topology.WriteManifest("policy.yaml", allowClient); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the client's policy enforced", func() bool {
		ok, _ := probe("udp", targets[2].addr)
		return ok == 0
	})
	held := startStream(t, sb, "tcp", targets[0].addr, "--persistent", "--timeout", "300ms")
	t0 := time.Now()
	time.Sleep(time.Second)
	if rs := held.since(t0); len(rs) == 0 || failures(rs) != 0 {
		t.Fatalf("a connection the policy allows, held open: %d of %d requests failed", failures(rs), len(rs))
	}

	// Then a policy letting only app=other in: new connections and the
	// one held open (its next packet) are dropped.
	policy := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: echo, namespace: default}
spec:
  podSelector: {matchLabels: {app: echo}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: other}}}]
    ports: [{port: http}, {port: udp, protocol: UDP}]
`
	if err := sb.Topology.WriteManifest("policy.yaml", policy); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the policy enforced", func() bool {
		ok, _ := probe("tcp", targets[0].addr)
		return ok == 0
	})
	t1 := time.Now()
	time.Sleep(time.Second)
	rs := held.since(t1)
	held.stop()
	if len(rs) == 0 || failures(rs) != len(rs) {
		t.Errorf("the policy allowing the connection held open was revoked: %d of %d requests on it since passed",
			len(rs)-failures(rs), len(rs))
	}
	for _, tg := range targets {
		if ok, _ := probe(tg.proto, tg.addr); ok != 0 {
			t.Errorf("policy: %s %s: %d requests passed, want none", tg.name, tg.addr, ok)
		}
	}
	if err := os.Remove(filepath.Join(sb.Topology.ManifestDir(), "policy.yaml")); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the policy lifted", func() bool {
		_, failed := probe("tcp", targets[0].addr)
		return failed == 0
	})
	for _, tg := range targets {
		if ok, failed := probe(tg.proto, tg.addr); failed != 0 {
			t.Errorf("policy removed: %s %s: %d of %d failed", tg.name, tg.addr, failed, ok+failed)
		}
	}
}

// failures counts the results that failed.
func failures(rs []timed) int {
	n := 0
	for _, r := range rs {
		if r.Err != "" {
			n++
		}
	}
	return n
}

// checkCyclonus runs the fast subset of cyclonus's generated cases
// (netpol.SmokeCases) on the real nodes, as `netcube-lab netpol --smoke` does:
// policies through the API server, every pod pair probed from inside the
// pods, each probe compared with cyclonus's matcher. Every case must pass.
func checkCyclonus(t *testing.T, sb *sandbox.Sandbox) {
	results := filepath.Join(t.TempDir(), "netpol.json")
	cmd := exec.Command(filepath.Join(binDir, sandbox.LabBinary), "netpol", "--reuse", "--name", sb.Config.Name, "--smoke", "--json", results)
	cmd.Stdout, cmd.Stderr = testenv.LogWriter(t), testenv.LogWriter(t)
	runErr := cmd.Run()
	rep, err := netpol.LoadJSON(results)
	if err != nil {
		t.Fatalf("netcube-lab netpol: %v; no results: %v", runErr, err)
	}
	if len(rep.Cases) != len(netpol.SmokeCases) {
		t.Errorf("%d cases ran, want %d", len(rep.Cases), len(netpol.SmokeCases))
	}
	for _, c := range rep.Cases {
		if !c.Passed {
			t.Errorf("case %q differs from cyclonus's matcher: %s\n%s", c.Description, c.Err, c.Failure)
		}
	}
	tot := rep.Totals()
	t.Logf("cyclonus subset: %d passed, %d failed in %s", tot.Passed, tot.Failed, rep.Wall.Round(time.Second))
}
