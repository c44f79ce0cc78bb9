// Command netcube-lab is netcube's lab on a developer's machine: the sandbox
// cluster, the demo, the benchmarks, the conformance runners (upstream
// e2e, cyclonus, network-policy-api), image building, and the traffic tools that run inside
// sandbox pods. Nothing here runs in a cluster; the operator's CLI is
// cmd/netcube.
package main

import (
	"fmt"
	"os"
)

const usage = `netcube-lab: netcube's lab (a cluster on this machine, benchmarks, conformance runs)

Usage:
  netcube-lab sandbox up|down|status|exec|kubectl|restart-agent          a cluster on this machine
  netcube-lab e2e [flags]                                                upstream sig-network e2e tests on real nodes
  netcube-lab netpol [flags]                                             cyclonus's NetworkPolicy cases on real nodes
  netcube-lab cnp [flags]                                                the upstream ClusterNetworkPolicy conformance suite on real nodes
  netcube-lab demo [flags]                                               sandbox + requests to each Service
  netcube-lab bench datapath|sync|compare|podnet|policy|policy-latency   benchmarks (docs/benchmarks)
  netcube-lab image agent|hubble-relay|pause [flags]                     an image as an archive (no registry)
  netcube-lab pod serve|request|load [flags]                             traffic tools run inside pods

Run 'netcube-lab <command> -h' for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "sandbox":
		err = sandboxCmd(os.Args[2:])
	case "e2e":
		err = e2eCmd(os.Args[2:])
	case "netpol":
		err = netpolCmd(os.Args[2:])
	case "cnp":
		err = cnpCmd(os.Args[2:])
	case "demo":
		err = demoCmd(os.Args[2:])
	case "bench":
		err = benchCmd(os.Args[2:])
	case "pod":
		err = podCmd(os.Args[2:])
	case "image":
		err = imageCmd(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		err = fmt.Errorf("unknown command %q\n\n%s", os.Args[1], usage)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "netcube-lab:", err)
		os.Exit(1)
	}
}
