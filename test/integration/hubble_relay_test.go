package integration

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/netcube/netcube/internal/testca"
	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/hubble"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// relayAddr is where the test's hubble-relay listens, in node1's
// namespace (where the hubble CLI is run too).
const relayAddr = "127.0.0.1:4245"

// TestHubbleRelay: the real hubble-relay, given one agent's Peer service
// over mutual TLS, finds every node's agent from it and serves the whole
// cluster: `hubble observe` through it shows flows of every node, each
// named by its node; `hubble list nodes` lists every node connected. An
// agent killed is listed as not connected (hubble list nodes: Error, its
// ServerStatus failing; hubble status: Unavailable Nodes, by name), and a
// stream already open goes on with the others' flows. The agents' TCP listener serves a client with
// the client CA's certificate, and refuses one without.
func TestHubbleRelay(t *testing.T) {
	dir := t.TempDir()
	ca, err := testca.New(dir, "hubble")
	if err != nil {
		t.Fatal(err)
	}
	// One certificate for every agent (and the Peer service's own name,
	// hubble-peer.default...), as Cilium's chart makes it.
	server, err := ca.Server("agents", "*."+hubble.DefaultClusterName+".hubble-grpc.cilium.io")
	if err != nil {
		t.Fatal(err)
	}
	relayCert, err := ca.Client("relay")
	if err != nil {
		t.Fatal(err)
	}
	sb := upWith(t, "thr", sandbox.Config{AgentArgs: []string{"--monitor-trace",
		"--hubble-tls-cert-file", server.CertFile, "--hubble-tls-key-file", server.KeyFile,
		"--hubble-tls-client-ca-files", ca.CertFile}})
	top := sb.Topology
	node1, node2 := top.Nodes[0], top.Nodes[1]
	peerService := net.JoinHostPort(node1.IP4.String(), "4244")

	// The agents' TCP listener, reached from node1 by the hubble CLI: with
	// the client certificate it serves (positive control); without, it
	// refuses.
	node2Addr := net.JoinHostPort(node2.IP4.String(), "4244")
	tlsStatus := func(withCert bool) (string, error) {
		args := []string{"status", "--server", node2Addr, "--timeout", "5s", "--tls", "--tls-ca-cert-files", ca.CertFile,
			"--tls-server-name", hubble.TLSServerName(node2.Name, "")}
		if withCert {
			args = append(args, "--tls-client-cert-file", relayCert.CertFile, "--tls-client-key-file", relayCert.KeyFile)
		}
		out, err := sb.Output(node1.Name, hubbleCLI(t), args...)
		return string(out), err
	}
	if out, err := tlsStatus(true); err != nil || !strings.Contains(out, "Healthcheck") {
		t.Fatalf("hubble status on node2's TCP listener, with a client certificate: %v\n%s", err, out)
	}
	if out, err := tlsStatus(false); err == nil {
		t.Errorf("hubble status on node2's TCP listener without a client certificate was served:\n%s", out)
	}

	startRelay(t, sb, node1.Name, peerService, ca.CertFile, relayCert)
	cli := func(args ...string) (string, error) {
		out, err := sb.Output(node1.Name, hubbleCLI(t), append(args, "--server", relayAddr)...)
		return string(out), err
	}
	var listed string // the last hubble list nodes
	nodeStates := func() map[string]string {
		out, err := cli("list", "nodes")
		if err != nil {
			return nil
		}
		listed = out
		states := map[string]string{}
		for _, line := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(line); len(f) >= 2 {
				states[f[0]] = strings.ToLower(f[1])
			}
		}
		return states
	}
	testenv.WaitFor(t, 30*time.Second, "hubble list nodes through the relay: every node connected", func() bool {
		s := nodeStates()
		return s[node1.Name] == "connected" && s[node2.Name] == "connected"
	})
	t.Logf("hubble list nodes through the relay:\n%s", listed)
	// (The relay's health says NOT_SERVING for its first seconds.)
	testenv.WaitFor(t, 20*time.Second, "hubble status through the relay: Connected Nodes: 2/2", func() bool {
		out, err := cli("status")
		return err == nil && strings.Contains(out, "Connected Nodes: 2/2")
	})

	// Flows on both nodes: a pod of each connects to a Service (each
	// connection is traced where it starts).
	svc := net.JoinHostPort(sandbox.EchoIPs[0], "80")
	for _, n := range []sandbox.Node{node1, node2} {
		for _, r := range requestsFrom(t, sb, n.Pods[0].Name, "tcp", svc, 2) {
			if r.Err != "" {
				t.Fatalf("request from %s to %s: %s", n.Pods[0].Name, svc, r.Err)
			}
		}
	}
	byNode := func() map[string]int {
		out, err := cli("observe", "-o", "json", "--last", "1000")
		if err != nil {
			t.Logf("hubble observe through the relay: %v\n%s", err, out)
			return nil
		}
		count := map[string]int{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var r observerpb.GetFlowsResponse
			if protojson.Unmarshal([]byte(line), &r) == nil && r.GetFlow() != nil {
				count[r.GetNodeName()]++
				if r.GetFlow().GetNodeName() != r.GetNodeName() {
					t.Errorf("a flow of %q says node %q", r.GetNodeName(), r.GetFlow().GetNodeName())
				}
			}
		}
		return count
	}
	testenv.WaitFor(t, 20*time.Second, "hubble observe through the relay: flows of node1 and node2", func() bool {
		c := byNode()
		if c[node1.Name] > 0 && c[node2.Name] > 0 {
			t.Logf("hubble observe through the relay: flows by node %v", c)
			return true
		}
		return false
	})

	// A stream open through the relay, then node2's agent killed: node2
	// is listed unavailable and the stream goes on with node1's flows.
	follow := exec.Command(hubbleCLI(t), "observe", "--follow", "-o", "json", "--server", relayAddr, "--node-name", node1.Name)
	var followed syncBuffer
	follow.Stdout, follow.Stderr = &followed, &followed
	if err := sb.Start(node1.Name, follow); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follow.Process.Kill(); _ = follow.Wait() })
	time.Sleep(2 * time.Second) // the stream is open on both agents
	if err := sb.StopAgent(node2.Name, true); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, "hubble list nodes: node2 unavailable, node1 connected", func() bool {
		s := nodeStates()
		return s[node1.Name] == "connected" && s[node2.Name] != "" && s[node2.Name] != "connected"
	})
	t.Logf("hubble list nodes, node2's agent killed:\n%s", listed)
	var status string
	testenv.WaitFor(t, 30*time.Second, "hubble status through the relay: node2 unavailable", func() bool {
		status, _ = cli("status")
		return strings.Contains(status, "Connected Nodes: 1/2") && strings.Contains(status, "Unavailable Nodes: 1\n  - "+node2.Name)
	})
	t.Logf("hubble status, node2's agent killed:\n%s", status)
	before := strings.Count(followed.String(), `"flow"`)
	for _, r := range requestsFrom(t, sb, node1.Pods[0].Name, "tcp", svc, 2) {
		if r.Err != "" {
			t.Fatalf("request from %s after node2's agent died: %s", node1.Pods[0].Name, r.Err)
		}
	}
	testenv.WaitFor(t, 20*time.Second, "the open stream: node1's flows after node2's agent died", func() bool {
		return strings.Count(followed.String(), `"flow"`) > before
	})
}

// startRelay runs the real hubble-relay on node, its peers found through
// peerService with mutual TLS (clients of the relay: plain, on loopback).
func startRelay(t *testing.T, sb *sandbox.Sandbox, node, peerService, caFile string, cert testca.Pair) {
	t.Helper()
	dir, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "hubble-relay"), "serve",
		"--peer-service", peerService, "--listen-address", relayAddr, "--health-listen-address", "127.0.0.1:4246",
		"--tls-hubble-server-ca-files", caFile, "--tls-hubble-client-cert-file", cert.CertFile, "--tls-hubble-client-key-file", cert.KeyFile,
		"--disable-server-tls", "--retry-timeout", "2s")
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := sb.Start(node, cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("hubble-relay:\n%s", log.String())
		}
	})
}

// TestAgentHubbleTCPFailsClosed: an agent (hollow: no root) given a Hubble
// TCP address without certificates or --hubble-disable-tls refuses to
// start, naming the flags; the same with --hubble-disable-tls starts
// (positive control), and so does one given neither (the default address
// waits for certificates: existing setups keep starting).
func TestAgentHubbleTCPFailsClosed(t *testing.T) {
	dir := t.TempDir()
	agent := func(extra ...string) (*exec.Cmd, string, *syncBuffer) {
		ready := filepath.Join(dir, "ready")
		_ = os.Remove(ready)
		args := append([]string{"--datapath", "memory", "--socket-lb=false", "--manifests", dir, "--node-name", "n1",
			"--api-socket=", "--hubble-socket=", "--cni-socket=", "--metrics-bind-address=", "--healthz-bind-address=",
			"--bpf-root", filepath.Join(dir, "bpf"), "--ready-file", ready}, extra...)
		cmd := exec.Command(filepath.Join(binDir, "netcube-agent"), args...)
		var log syncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, ready, &log
	}
	starts := func(name string, extra ...string) {
		t.Helper()
		cmd, ready, log := agent(extra...)
		testenv.WaitFor(t, 20*time.Second, name+": the agent ready", func() bool {
			_, err := os.Stat(ready)
			return err == nil
		})
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if strings.Contains(log.String(), "--hubble-") {
			t.Errorf("%s: the agent complained of its Hubble flags:\n%s", name, log.String())
		}
	}
	starts("--hubble-disable-tls", "--hubble-listen-address", "127.0.0.1:4299", "--hubble-disable-tls")
	starts("the defaults")

	cmd, _, log := agent("--hubble-listen-address", "127.0.0.1:4299")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("the agent exited 0")
		}
		for _, want := range []string{"--hubble-listen-address 127.0.0.1:4299", "--hubble-tls-cert-file", "--hubble-disable-tls"} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("the agent's error does not name %s:\n%s", want, log.String())
			}
		}
	case <-time.After(20 * time.Second):
		t.Errorf("an agent with a Hubble TCP address and no certificates still runs after 20s:\n%s", log.String())
	}
}
