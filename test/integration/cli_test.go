package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netcube/netcube/cmd/netcube/status"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cubes/lb"
)

// netcubeCLI runs the operator's CLI against a node of the sandbox.
func netcubeCLI(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	args = append(args, "--socket", sb.Topology.APISocket(node), "--bpf-root", node.PinDir)
	cmd := exec.Command(filepath.Join(binDir, "netcube"), args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestServiceListAndStatusWithTheAgentDown: `netcube service list` shows
// each frontend with its Service's name and the backends the datapath
// holds (the echo Service's pods, the empty Service's none), and `netcube
// status` the node's cubes, maps, attach points and drops; with the
// agent stopped both still read the datapath (service list without
// names, saying why), and status says the agent is not answering.
func TestServiceListAndStatusWithTheAgentDown(t *testing.T) {
	sb := up(t, true)
	node := sb.Topology.Nodes[0]
	empty := sandbox.EmptyIPs[0] + ":80/TCP"
	echo := sandbox.EchoIPs[0] + ":80/TCP"
	// A drop for status to count, and packets for its router.
	for _, r := range requests(t, sb, "tcp", sandbox.EmptyIPs[0]+":80", 1) {
		refusedFast(t, r)
	}
	for _, r := range requests(t, sb, "tcp", sandbox.EchoIPs[0]+":80", 2) {
		if r.Err != "" {
			t.Fatalf("echo: %s", r.Err)
		}
	}
	var backends []string
	for _, p := range sb.Topology.EchoBackends() {
		backends = append(backends, p.IP4.String()+":8080")
	}

	list := func(wantNames bool) {
		t.Helper()
		out, errOut, err := netcubeCLI(t, sb, node, "service", "list", "-o", "json")
		if err != nil {
			t.Fatalf("netcube service list: %v\n%s", err, errOut)
		}
		var svcs []lb.Programmed
		if err := json.Unmarshal([]byte(out), &svcs); err != nil {
			t.Fatalf("netcube service list -o json: %v\n%s", err, out)
		}
		byFE := map[string]lb.Programmed{}
		for _, s := range svcs {
			byFE[s.Frontend] = s
		}
		e, ok := byFE[echo]
		if !ok {
			t.Fatalf("no %s in %s", echo, out)
		}
		var got []string
		for _, b := range e.Backends {
			got = append(got, b.Addr)
		}
		slices.Sort(got)
		slices.Sort(backends)
		if !slices.Equal(got, backends) {
			t.Errorf("%s backends %v, want %v", echo, got, backends)
		}
		if em, ok := byFE[empty]; !ok || len(em.Backends) != 0 {
			t.Errorf("%s: %+v (present %v), want no backends", empty, em, ok)
		}
		if wantNames && (e.Service != "default/echo" || byFE[empty].Service != "default/empty") {
			t.Errorf("names %q, %q; want default/echo, default/empty", e.Service, byFE[empty].Service)
		}
		if !wantNames {
			if e.Service != "" {
				t.Errorf("a name %q with the agent down", e.Service)
			}
			if !strings.Contains(errOut, "no agent answers") || !strings.Contains(errOut, "Service names unknown") {
				t.Errorf("service list with the agent down said %q", errOut)
			}
		}
		table, _, err := netcubeCLI(t, sb, node, "service", "list")
		if err != nil || !strings.Contains(table, echo) || !strings.Contains(table, "(none: refused)") {
			t.Errorf("netcube service list (table): %v\n%s", err, table)
		}
	}
	checkStatus := func(agentUp bool) {
		t.Helper()
		out, errOut, err := netcubeCLI(t, sb, node, "status")
		if err != nil {
			t.Fatalf("netcube status: %v\n%s", err, errOut)
		}
		for _, want := range []string{"Kernel:", "features: ok", "Cubes:", "lb_services", "ct_flows", "Conntrack:", "no-endpoints 1", "Events:"} {
			if !strings.Contains(out, want) {
				t.Errorf("netcube status lacks %q:\n%s", want, out)
			}
		}
		if agentUp != strings.Contains(out, "Agent:      node "+node.Name) {
			t.Errorf("netcube status with the agent up=%v:\n%s", agentUp, out)
		}
		if !agentUp && !strings.Contains(out, "not answering") {
			t.Errorf("netcube status with the agent down does not say so:\n%s", out)
		}
		js, _, err := netcubeCLI(t, sb, node, "status", "-o", "json")
		if err != nil {
			t.Fatalf("netcube status -o json: %v", err)
		}
		var r status.Report
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			t.Fatalf("netcube status -o json: %v\n%s", err, js)
		}
		for _, c := range r.Cubes {
			if c.Cube == "router" && (c.Traffic == nil || c.Traffic.Packets == 0 || c.Traffic.Bytes < 40*c.Traffic.Packets) {
				t.Errorf("netcube status: the router's traffic %+v after the echo requests", c.Traffic)
			}
		}
	}
	list(true)
	checkStatus(true)
	if err := sb.StopAgent(node.Name, true); err != nil {
		t.Fatal(err)
	}
	list(false)
	checkStatus(false)
	if err := sb.StartAgent(node.Name); err != nil {
		t.Fatal(err)
	}
	list(true)
}
