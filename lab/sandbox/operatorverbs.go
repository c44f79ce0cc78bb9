package sandbox

// The operator's verbs against a sandbox node. A sandbox's agents pin
// and listen under the sandbox's own paths (several sandboxes, and a
// real node's agent, can share one machine), so netcube's verbs and the
// hubble CLI need to be told where: OperatorEnv is that environment,
// which `netcube-lab sandbox env NODE` prints and `netcube-lab sandbox
// exec NODE -- ...` sets.

import "fmt"

// OperatorEnv is the environment under which `netcube` (its --socket and
// --bpf-root defaults: cmd/netcube/internal/agentapi) and `hubble` (its
// --server) reach node n's agent.
func (t Topology) OperatorEnv(n Node) []string {
	return []string{
		"NETCUBE_SOCKET=" + t.APISocket(n),
		"NETCUBE_BPF_ROOT=" + n.PinDir,
		"HUBBLE_SERVER=unix://" + t.HubbleSocket(n),
	}
}

// OperatorCommand is one of the operator's first commands, as printed.
type OperatorCommand struct {
	What, Line string
	// Needs, if set, is what must run beside it for it to end: monitor
	// waits for events (requests to the Service with no endpoints make
	// drops).
	Needs string
}

// OperatorCommands are the operator's first commands against node n of
// a sandbox named name, run from the checkout (bin/ built), as the demo
// and `sandbox status` print them.
func (t Topology) OperatorCommands(name string, n Node) []OperatorCommand {
	exec := fmt.Sprintf("bin/netcube-lab sandbox exec --name %s %s -- ", name, n.Name)
	client := t.ClientPod()
	return []OperatorCommand{
		{What: "the node's datapath: attach points, cubes, maps, drops", Line: exec + "bin/netcube status"},
		{What: "the Services it serves", Line: exec + "bin/netcube service list"},
		{What: "a packet through its programs, cube by cube", Line: exec + fmt.Sprintf("bin/netcube trace %s %s:80/tcp", client.IP4, EchoIPs[0])},
		{What: "the policy it enforces for a pod", Line: exec + "bin/netcube policy get default/" + client.Name},
		{What: "its events, live (-n 5: the first five)", Line: exec + "bin/netcube monitor -n 5",
			Needs: fmt.Sprintf("bin/netcube-lab sandbox exec --name %s %s -- bin/netcube-lab pod request --count 5 %s:80", name, client.Name, EmptyIPs[0])},
		{What: "its flows through the Hubble API (bin/hubble: make tools)", Line: exec + "bin/hubble observe --last 10"},
	}
}
