// Command netcube is netcube's CLI: the sandbox cluster, the demo, the
// benchmarks, and the traffic tools that run inside sandbox pods.
package main

import (
	"fmt"
	"os"
)

const usage = `netcube: eBPF Service load balancing and pod networking for Kubernetes

Usage:
  netcube sandbox up|down|status|exec|kubectl|restart-agent   a cluster on this machine
  netcube e2e [flags]                                         upstream sig-network e2e tests on real nodes
  netcube netpol [flags]                                      cyclonus's NetworkPolicy cases on real nodes
  netcube demo [flags]                                        sandbox + requests to each Service
  netcube bench datapath|sync|compare|podnet|policy|policy-latency  benchmarks (docs/benchmarks)
  netcube image agent|pause [flags]                           an image as an archive (no registry)
  netcube pod serve|request|load [flags]                      traffic tools run inside pods

Run 'netcube <command> -h' for a command's flags.
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
		fmt.Fprintln(os.Stderr, "netcube:", err)
		os.Exit(1)
	}
}
