package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Write writes failover.json, failover.md and plots/failover.svg under dir.
func (r *FailoverReport) Write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "failover.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "plots", "failover.svg"), []byte(r.svg()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "failover.md"), []byte(r.Markdown()), 0o644)
}

// Markdown renders the report: a row per fault, then the targets.
func (r *FailoverReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# Failover of a LoadBalancer IP\n\n")
	fmt.Fprintf(&b, "Measured at netcube commit `%s` on %s, %s, by `%s`.\n\n", r.Commit, r.MeasuredAt.Format("2006-01-02"), r.Machine, r.Command)
	fmt.Fprintf(&b, "The routed sandbox (`netcube-lab sandbox up --routed`): node1 and node2 in two racks behind a router running BIRD 2, "+
		"each node's agent peering with it over eBGP (hold time %.0f s, graceful restart on both sides). A LoadBalancer Service "+
		"(`externalTrafficPolicy: Cluster`, its pod on node1) is announced by both nodes, so the router spreads connections "+
		"over both by ECMP (hashing ports too). A host behind the router opens a new TCP connection every %.0f ms "+
		"(each answered within %.0f ms or counted failed). Then node2 dies (its agent SIGKILLed and its uplink down, so no TCP FIN "+
		"reaches the router) or its agent only restarts (SIGTERM, started again 2 s later). Gap: from the start of the first "+
		"connection that failed after the fault to the end of the last. (The pod is on the surviving node: what fails over is the "+
		"address, not a backend on the dead node, which nothing in this sandbox would mark not ready.)\n\n", r.HoldS, r.IntervalMs, r.TimeoutMs)
	b.WriteString("| run | fault | connections | failed | gap s | router dropped node2 after s |\n|---:|---|---:|---:|---:|---:|\n")
	for _, x := range r.Results {
		drop := "never"
		if x.RouterDropS >= 0 {
			drop = fmt.Sprintf("%.2f", x.RouterDropS)
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %d | %.2f | %s |\n", x.Run, x.Fault, x.Connections, x.Failed, x.GapS, drop)
	}
	for _, fault := range []string{FaultNodeDies, FaultAgentRestarts} {
		worst, failed := 0.0, 0
		for _, x := range r.Results {
			if x.Fault == fault {
				worst, failed = math.Max(worst, x.GapS), failed+x.Failed
			}
		}
		fmt.Fprintf(&b, "\n%s: worst gap **%.2f s**, connections failed **%d**.", fault, worst, failed)
	}
	fmt.Fprintf(&b, "\n\nTargets (issue 70): the BGP gap within the hold time (%.0f s here), and an agent restart with no route "+
		"withdrawn and no connection failed. For comparison, Cilium's L2 announcements default to a 15 s lease "+
		"(`l2announcements.leaseDuration`), and BGP without BFD waits for the hold time (90 s by default in BIRD, FRR and GoBGP).\n\n"+
		"![connections answered per 200 ms](plots/failover.svg)\n", r.HoldS)
	return b.String()
}

// svg plots each fault's first run: connections answered and failed per
// 200 ms, and the router's next hops.
func (r *FailoverReport) svg() string {
	var xs []int
	var ss []series
	for _, fault := range []string{FaultNodeDies, FaultAgentRestarts} {
		for _, x := range r.Results {
			if x.Fault != fault {
				continue
			}
			ok, failed, hops := make([]float64, len(x.Timeline)), make([]float64, len(x.Timeline)), make([]float64, len(x.Timeline))
			for i, s := range x.Timeline {
				ok[i], failed[i], hops[i] = float64(s.OK), float64(s.Failed), float64(s.NextHops)
			}
			if len(xs) < len(x.Timeline) {
				xs = xs[:0]
				for i := range x.Timeline {
					xs = append(xs, i/5)
				}
			}
			dashed := fault == FaultAgentRestarts
			ss = append(ss, series{name: "answered, " + fault, ys: ok, dashed: dashed},
				series{name: "failed, " + fault, ys: failed, dashed: dashed},
				series{name: "router next hops, " + fault, ys: hops, dashed: dashed})
			break
		}
	}
	for i := range ss {
		for len(ss[i].ys) < len(xs) {
			ss[i].ys = append(ss[i].ys, math.NaN())
		}
	}
	return svgPlot(fmt.Sprintf("LoadBalancer IP failover, BGP hold %.0f s: connections per 200 ms", r.HoldS), "seconds", xs, ss)
}
