package integration

import (
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
)

// TestPortReuseAcrossDirectAndServiceFlows is the conntrack black hole of
// issue 14, on the tc path: a busy client opens connections to a backend pod
// directly and to that pod's Service, reusing its source ports (here 500 of
// them, so every port is reused many times). A direct flow must not leave a
// later Service flow on the same port with half a conntrack entry: every
// connection in every phase is answered.
func TestPortReuseAcrossDirectAndServiceFlows(t *testing.T) {
	sb := up(t, false)
	client := sb.Topology.ClientPod()
	backend := sb.Topology.EchoBackends()[0]
	ips := []string{"10.96.0.90", "fd00:10:96::90"}
	if err := sb.Topology.WriteManifest("reuse.yaml", sandbox.ServiceYAML("reuse", ips, sandbox.EchoPorts)+"---\n"+
		sandbox.SliceYAML("reuse", false, sandbox.EndpointPorts, []sandbox.Pod{backend})+"---\n"+
		sandbox.SliceYAML("reuse", true, sandbox.EndpointPorts, []sandbox.Pod{backend})); err != nil {
		t.Fatal(err)
	}
	// Few ports, so that tens of thousands of connections reuse each one.
	if _, err := sb.Output(client.Name, "sysctl", "-w", "net.ipv4.ip_local_port_range=40000 40499"); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []struct {
		name        string
		service, to string
	}{
		{"IPv4", net.JoinHostPort(ips[0], "80"), net.JoinHostPort(backend.IP4.String(), strconv.Itoa(sandbox.PodPort))},
		{"IPv6", net.JoinHostPort(ips[1], "80"), net.JoinHostPort(backend.IP6.String(), strconv.Itoa(sandbox.PodPort))},
	} {
		t.Run(fam.name, func(t *testing.T) {
			testenv.WaitFor(t, 10*time.Second, fam.service, func() bool {
				return requests(t, sb, "tcp", fam.service, 1, "--timeout", "200ms")[0].Err == ""
			})
			for _, phase := range []struct{ name, addr string }{
				{"the Service", fam.service}, // positive control; leaves Service entries on every port
				{"the pod directly", fam.to},
				{"the Service again", fam.service},
			} {
				s := load(t, sb, client.Name, phase.addr, 3*time.Second)
				t.Logf("%s (%s): %s", phase.name, phase.addr, s)
				if s.Errors > 0 {
					t.Fatalf("%s: %d of %d connections failed (first: %s)", phase.name, s.Errors, s.Requests, s.FirstErr)
				}
				if s.Requests < 2000 {
					t.Fatalf("%s: only %d connections in 3 s; too few to reuse every port", phase.name, s.Requests)
				}
			}
		})
	}
}

// load runs `netcube-lab pod load` (a new TCP connection per request) from who
// to addr for d.
func load(t *testing.T, sb *sandbox.Sandbox, who, addr string, d time.Duration) traffic.Summary {
	t.Helper()
	out, err := sb.Output(who, filepath.Join(binDir, sandbox.LabBinary), "pod", "load", "--proto", "tcp",
		"--timeout", "300ms", "--duration", d.String(), addr)
	if err != nil {
		t.Fatal(err)
	}
	var s traffic.Summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("load output %q: %v", out, err)
	}
	return s
}
