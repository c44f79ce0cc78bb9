package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
)

// hubbleCLI is the real hubble CLI (cilium's, built by hack/build-tools.sh
// from hack/tools/hubble).
func hubbleCLI(t *testing.T) string {
	t.Helper()
	dir, err := kubeenv.ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "hubble")
}

// observe runs `hubble observe -o json` against a node's agent with args
// and returns the flows it printed.
func observe(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node, args ...string) []*observerpb.GetFlowsResponse {
	t.Helper()
	args = append([]string{"observe", "--server", "unix://" + sb.Topology.HubbleSocket(node), "-o", "json", "--last", "1000"}, args...)
	out, err := exec.Command(hubbleCLI(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("hubble %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var flows []*observerpb.GetFlowsResponse
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var r observerpb.GetFlowsResponse
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("hubble observe printed %q: %v", line, err)
		}
		flows = append(flows, &r)
	}
	return flows
}

// hubbleStatus: `hubble status` against the node's agent is healthy.
func hubbleStatus(t *testing.T, sb *sandbox.Sandbox, node sandbox.Node) {
	t.Helper()
	out, err := exec.Command(hubbleCLI(t), "status", "--server", "unix://"+sb.Topology.HubbleSocket(node)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Ok") || !strings.Contains(string(out), "Flows") {
		t.Errorf("hubble status on %s: %v\n%s", node.Name, err, out)
	}
}
