package bench

import (
	"fmt"
	"math"
	"strings"
)

// Write writes failover.json, failover.md and plots/failover.svg under dir.
func (r *FailoverReport) Write(dir string) error {
	return writeReportFiles(dir, "failover", r, r.Markdown(), r.svg())
}

// Markdown renders the report: a row per fault, then the targets.
func (r *FailoverReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# Failover of a LoadBalancer IP: BGP and L2\n\n")
	fmt.Fprintf(&b, "Measured at netcube commit `%s` on %s, %s, by `%s`.\n\n", r.Commit, r.MeasuredAt.Format("2006-01-02"), r.Machine, r.Command)
	fmt.Fprintf(&b, "A host outside the cluster opens a new TCP connection to a LoadBalancer IP (`externalTrafficPolicy: Cluster`) every "+
		"%.0f ms, each answered within %.0f ms or counted failed. Then a node that serves the address dies (its uplink down, then its "+
		"agent SIGKILLed: nothing more is heard from it) or its agent only restarts (SIGTERM, started again 2 s later). The Service's "+
		"pod is on the surviving node: what fails over is the address, not a backend on the dead node (nothing in these sandboxes "+
		"would mark it not ready). Gap: from the start of the first connection that failed after the fault to the end of the last.\n\n", r.IntervalMs, r.TimeoutMs)
	fmt.Fprintf(&b, "- **bgp**: the routed sandbox (`netcube-lab sandbox up --routed`): node1 and node2 in two racks behind a router "+
		"running BIRD 2, each node's agent peering with it over eBGP (hold time %.0f s, graceful restart on both sides). Both nodes "+
		"announce the address; the router spreads connections over both by ECMP (hashing ports too). Moved: the router's FIB no "+
		"longer routes it via node2.\n", r.HoldS)
	b.WriteString("- **l2**: the default sandbox: the nodes and the client share a link; one node, elected from the agents' heartbeats " +
		"(every 200 ms, dead after 3 missed), answers ARP for the address. The faulted node is that one. Moved: the other node's " +
		"datapath answers for it (and has sent a gratuitous ARP). Once the sandbox's bridge forgets the dead node's MAC it floods " +
		"the client's frames for it to every port, where a veth, which has no MAC filter, hands them to the other node: its " +
		"datapath leaves a frame to another host's MAC to its kernel, which drops it, as a NIC's MAC filter would.\n\n")
	b.WriteString("| run | mode | fault | connections | failed | gap s | address moved after s |\n|---:|---|---|---:|---:|---:|---:|\n")
	for _, x := range r.Results {
		drop := "never"
		if x.RouterDropS >= 0 {
			drop = fmt.Sprintf("%.2f", x.RouterDropS)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %d | %.2f | %s |\n", x.Run, x.Mode, x.Fault, x.Connections, x.Failed, x.GapS, drop)
	}
	b.WriteString("\n")
	for _, mode := range []string{FailoverBGP, FailoverL2} {
		for _, fault := range []string{FaultNodeDies, FaultAgentRestarts} {
			worst, failed, n := 0.0, 0, 0
			for _, x := range r.Results {
				if x.Mode == mode && x.Fault == fault {
					worst, failed, n = math.Max(worst, x.GapS), failed+x.Failed, n+1
				}
			}
			if n > 0 {
				fmt.Fprintf(&b, "- %s, %s: worst gap **%.2f s**, connections failed **%d** (%d runs).\n", mode, fault, worst, failed, n)
			}
		}
	}
	fmt.Fprintf(&b, "\nTargets (issue 70): L2 gap ≤ 1.5 s; BGP gap ≤ the hold time (%.0f s here; netcube's speaker has no BFD); "+
		"an agent restart: no route withdrawn and no connection failed. For comparison: Cilium's L2 announcements hold a Lease per "+
		"Service, 15 s by default (`l2announcements.leaseDuration`, Cilium docs, \"L2 Announcements\"), so a dead announcer's address "+
		"moves after up to 15 s; MetalLB's L2 mode detects a dead speaker by memberlist, in seconds; BGP without BFD waits for the "+
		"hold time, 90 s by default in BIRD, FRR and GoBGP.\n\n![connections per 200 ms](plots/failover.svg)\n", r.HoldS)
	return b.String()
}

// svg plots the first run of a node dying in each mode: connections
// answered and failed per 200 ms.
func (r *FailoverReport) svg() string {
	var xs []int
	var ss []series
	for _, mode := range []string{FailoverBGP, FailoverL2} {
		for _, x := range r.Results {
			if x.Mode != mode || x.Fault != FaultNodeDies {
				continue
			}
			ok, failed := make([]float64, len(x.Timeline)), make([]float64, len(x.Timeline))
			for i, s := range x.Timeline {
				ok[i], failed[i] = float64(s.OK), float64(s.Failed)
			}
			if len(xs) < len(x.Timeline) {
				xs = xs[:0]
				for i := range x.Timeline {
					xs = append(xs, i/5)
				}
			}
			dashed := mode == FailoverL2
			ss = append(ss, series{name: "answered, " + mode, ys: ok, dashed: dashed}, series{name: "failed, " + mode, ys: failed, dashed: dashed})
			break
		}
	}
	for i := range ss {
		for len(ss[i].ys) < len(xs) {
			ss[i].ys = append(ss[i].ys, math.NaN())
		}
	}
	return svgPlot("A node serving a LoadBalancer IP dies: connections per 200 ms", "seconds", xs, ss)
}
