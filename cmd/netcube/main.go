// Command netcube is the operator's CLI for a cluster that runs netcube:
// what an operator asks of a node's agent and datapath: its BGP sessions
// and routes (bgp), which workloads talk to which Services and pods
// (flows map), its live events
// (monitor), the Services it serves (service list), its state (status), what it
// does with a packet (trace), the policy it enforces for a pod (policy get),
// and which build it is. Each verb is its own package. The lab's verbs (sandbox, demo, bench, e2e,
// netpol, image, pod) are netcube-lab's (lab/cmd/netcube-lab).
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/netcube/netcube/cmd/netcube/bgp"
	"github.com/netcube/netcube/cmd/netcube/flows"
	"github.com/netcube/netcube/cmd/netcube/monitor"
	"github.com/netcube/netcube/cmd/netcube/policy"
	"github.com/netcube/netcube/cmd/netcube/service"
	"github.com/netcube/netcube/cmd/netcube/status"
	"github.com/netcube/netcube/cmd/netcube/trace"
)

const usage = `netcube: the operator's CLI for netcube, eBPF Service load balancing and pod networking for Kubernetes

Usage:
  netcube bgp peers|routes   the node's BGP sessions (state, prefixes sent and received) and the routes it announces
  netcube flows map      which workloads talk to which Services and pods, from Hubble's flows: SVG, HTML page, JSON
  netcube monitor        the node's datapath events, live: drops with their reason, policy verdicts, translations
  netcube policy get POD the NetworkPolicy the node's datapath enforces for a pod: isolation, rules, identities
  netcube service list   the Services the node's datapath serves: frontends, backends (works with the agent down)
  netcube status         the node's datapath: kernel, attach points, cubes and their maps' fill, drops, losses
  netcube trace SRC DST:PORT[/PROTO]   a packet and its reply through the node's programs, cube by cube, without sending it
  netcube version        the build: module version, commit, Go version

The lab on a developer's machine (sandbox, demo, bench, e2e, netpol, image, pod) is netcube-lab.
`

// labVerbs were netcube's verbs before the lab got its own binary: a user
// who types one is told where it went.
var labVerbs = map[string]bool{"sandbox": true, "demo": true, "bench": true, "e2e": true, "netpol": true, "image": true, "pod": true}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch verb := args[0]; {
	case verb == "bgp":
		return bgp.Run(args[1:], stdout, stderr)
	case verb == "flows":
		return flows.Run(args[1:], stdout, stderr)
	case verb == "monitor":
		return monitor.Run(args[1:], stdout, stderr)
	case verb == "policy":
		return policy.Run(args[1:], stdout, stderr)
	case verb == "service":
		return service.Run(args[1:], stdout, stderr)
	case verb == "status":
		return status.Run(args[1:], stdout, stderr)
	case verb == "trace":
		return trace.Run(args[1:], stdout, stderr)
	case verb == "version":
		fmt.Fprintln(stdout, version())
		return 0
	case verb == "-h" || verb == "--help" || verb == "help":
		fmt.Fprint(stdout, usage)
		return 0
	case labVerbs[verb]:
		fmt.Fprintf(stderr, "netcube: %q is a lab verb: run netcube-lab %s\n", verb, verb)
		return 2
	default:
		fmt.Fprintf(stderr, "netcube: unknown command %q\n\n%s", verb, usage)
		return 2
	}
}

// commit is set by `make build` (-ldflags -X main.commit=...): the build
// info's own VCS stamp is off where GOFLAGS has -buildvcs=false.
var commit string

// version describes this build from what the Go toolchain stamped into it.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "netcube (no build information)"
	}
	rev, modified := "unknown", ""
	if commit != "" {
		rev = commit
	}
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = " (modified)"
		}
	}
	return fmt.Sprintf("netcube %s, commit %s%s, %s", info.Main.Version, rev, modified, info.GoVersion)
}
