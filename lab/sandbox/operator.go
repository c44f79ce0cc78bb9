package sandbox

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const operatorName = "operator"

// startOperator runs netcube-operator, which gives LoadBalancer Services
// their IPs (no agent does), as a process on the underlay beside the API
// server, as the agents run: with the sandbox's admin kubeconfig, as they
// do (TestRBACIsEnough runs it with the chart's ServiceAccount; real
// nodes, up --kubelet, run the chart's Deployment). A BinDir without it
// (an earlier version's, in an upgrade) leaves the assigning to its
// agents.
func (sb *Sandbox) startOperator(log io.Writer) error {
	t := sb.Topology
	bin := filepath.Join(sb.Config.BinDir, "netcube-operator")
	if _, err := os.Stat(bin); err != nil {
		fmt.Fprintf(log, "  netcube-operator: not in %s, not started\n", sb.Config.BinDir)
		return nil
	}
	fmt.Fprintf(log, "  netcube-operator: LoadBalancer IPs\n")
	return spawn(t, operatorName, t.Underlay, "", bin, "--kubeconfig", t.Kubeconfig(), "--namespace", "kube-system",
		"--identity", "sandbox-"+sb.Config.Name)
}

// OperatorPID is the pid of netcube-operator, if it runs.
func (t Topology) OperatorPID() (int, bool) { return pidOf(t, operatorName) }
