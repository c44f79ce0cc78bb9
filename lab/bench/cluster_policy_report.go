package bench

import (
	"fmt"
	"strings"

	"github.com/netcube/netcube/lab/bench/native"
)

// clusterPolicyTarget: ClusterNetworkPolicies on top of NetworkPolicy keep
// at least this share of NetworkPolicy alone's figures (issue 71).
const clusterPolicyTarget = 0.98

// writeCluster writes the report of a run with mode cluster:
// cluster-policy.{json,md} and plots/cluster-policy.svg.
func (r *PolicyReport) writeCluster(dir string) error {
	return writeReportFiles(dir, "cluster-policy", r, r.ClusterMarkdown(), r.clusterPlot())
}

// clusterPlot: each path's new connections/s relative to no policy, with
// NetworkPolicy alone (0 ClusterNetworkPolicies) and with them.
func (r *PolicyReport) clusterPlot() string {
	var ss []series
	n := 0
	for _, p := range r.Points {
		if p.Cluster == nil || p.None.ConnPerSec == 0 {
			continue
		}
		ss = append(ss, series{name: p.Family + " " + p.Placement,
			ys: []float64{p.Policies.ConnPerSec / p.None.ConnPerSec, p.Cluster.ConnPerSec / p.None.ConnPerSec}})
		if n == 0 {
			t := series{name: "target: 0.98 of NP alone", dashed: true, ys: []float64{p.Policies.ConnPerSec / p.None.ConnPerSec, clusterPolicyTarget * p.Policies.ConnPerSec / p.None.ConnPerSec}}
			ss = append(ss, t)
		}
		n++
	}
	return svgPlot("new connections/s, relative to no policy", "ClusterNetworkPolicies (on top of the NetworkPolicies)", []int{0, 2 * r.clusterPerTier()}, ss)
}

func (r *PolicyReport) clusterPerTier() int {
	var n int
	fmt.Sscanf(r.ClusterScale, "%d", &n)
	return n
}

// ClusterMarkdown renders the report of a run with mode cluster.
func (r *PolicyReport) ClusterMarkdown() string {
	var b strings.Builder
	b.WriteString("# ClusterNetworkPolicy: per-packet cost\n\n")
	fmt.Fprintf(&b, "Measured at netcube commit `%s` on %s, %s, by `%s` (%d runs of %.0f s per figure, each target measured with no policy, NetworkPolicy alone and NetworkPolicy with the ClusterNetworkPolicies back to back, the order reversed every other run; medians).\n\n",
		r.Commit, r.MeasuredAt.Format("2006-01-02"), r.Machine, r.Command, r.Runs, r.DurationS)
	fmt.Fprintf(&b, "NetworkPolicy alone: %s (%s): the client pod egress-isolated and the servers ingress-isolated, each allowed by one rule. "+
		"With ClusterNetworkPolicies: the same and %s (%s), written as the API's objects and converted as the agent converts them (`lab/bench/cluster_policies.go`). "+
		"Most of their rules are about other traffic: Deny, Accept and Pass rules with the other namespaces' apps as peers on ports of their own (TCP, TCP ranges, UDP), "+
		"egress rules to networks, near misses on the measured ports' neighbours (7001-7100) for the benchmark's own pods; the measured connection is decided by the tiers: "+
		"the middle Admin policy passes it to NetworkPolicy (both directions, after every Admin rule before it), whose rules allow it, and the last Baseline policy denies every pod's ingress "+
		"(the client's: no NetworkPolicy isolates it). The client and the servers then have tier sets of their own: each new connection is looked up in their entries, on both ends. "+
		"The tables are compiled as the agent compiles them and written into each node's pinned maps. Native code (ncperf), client and server pinned to one CPU.\n\n",
		r.Scale, r.Tables, r.ClusterScale, r.ClusterTables)
	fmt.Fprintf(&b, "Target: new connections/s and request/response p99 with the ClusterNetworkPolicies at least %.2f of NetworkPolicy alone (p99: at most 1/%.2f of it).\n\n", clusterPolicyTarget, clusterPolicyTarget)
	b.WriteString("| path | conn/s, no policy | NetworkPolicy alone | + ClusterNetworkPolicies | ratio to NP alone | target | rr p99 µs, no policy | NetworkPolicy alone | + ClusterNetworkPolicies | ratio to NP alone | target |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|\n")
	for _, p := range r.Points {
		if p.Cluster == nil {
			continue
		}
		c := p.Cluster.ConnPerSec / p.Policies.ConnPerSec
		l := p.Policies.RRP99 / p.Cluster.RRP99
		fmt.Fprintf(&b, "| %s %s | %.0f | %.0f | %.0f | %.3f | %s | %.1f | %.1f | %.1f | %.3f | %s |\n", p.Family, p.Placement,
			p.None.ConnPerSec, p.Policies.ConnPerSec, p.Cluster.ConnPerSec, c, met(c >= clusterPolicyTarget),
			p.None.RRP99, p.Policies.RRP99, p.Cluster.RRP99, p.Cluster.RRP99/p.Policies.RRP99, met(l >= clusterPolicyTarget))
	}
	b.WriteString("\n![new connections/s relative to no policy](plots/cluster-policy.svg)\n\n")
	b.WriteString("The runs' spread, new connections/s [min–max] of each mode (a ratio inside the spread of one mode's own runs says nothing about the policies):\n\n")
	b.WriteString("| path | no policy | NetworkPolicy alone | + ClusterNetworkPolicies |\n|---|---|---|---|\n")
	for _, p := range r.Points {
		fmt.Fprintf(&b, "| %s %s | %s | %s | %s |\n", p.Family, p.Placement, crrSpread(p, "none"), crrSpread(p, "policies"), crrSpread(p, "cluster"))
	}
	b.WriteString("\n## Where a connection's time goes\n\n")
	b.WriteString("netcube's programs' own time per new connection (the tc programs and socket hooks of every node, their map lookups and helpers included), from the kernel's BPF statistics, in a 1 s run of new connections of its own per path and mode, the modes back to back, after the measured runs.\n\n")
	b.WriteString("| path | BPF ns per connection, no policy | NetworkPolicy alone | + ClusterNetworkPolicies | added by the ClusterNetworkPolicies | program runs per connection, NP alone | + ClusterNetworkPolicies |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		if p.Cluster == nil {
			continue
		}
		fmt.Fprintf(&b, "| %s %s | %.0f | %.0f | %.0f | %.0f | %.1f | %.1f |\n", p.Family, p.Placement, p.None.BPFNsPerConn, p.Policies.BPFNsPerConn,
			p.Cluster.BPFNsPerConn, p.Cluster.BPFNsPerConn-p.Policies.BPFNsPerConn, p.Policies.BPFRunsPerConn, p.Cluster.BPFRunsPerConn)
	}
	b.WriteString("\nA tier set's entries are looked up as NetworkPolicy's are (the peer's identity, then at most six entries), whatever the number of policies: what the ClusterNetworkPolicies add per connection is expected to be within the machine's noise.\n\n")
	knpMarkdown(&b, r.KubeNetworkPolicies)
	b.WriteString("The machine is shared and noisy: compare the ratios of one run, not figures across runs.\n")
	return b.String()
}

// crrSpread is one mode's new connections/s [min–max] over the runs.
func crrSpread(p PolicyPoint, mode string) string {
	xs := ncField(p.Raw[mode+" crr"], func(r native.Result) float64 { return r.PerSec })
	if len(xs) == 0 {
		return "n/a"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.0f–%.0f (±%.0f%% of the median)", lo, hi, 50*(hi-lo)/pctl(xs, 0.5))
}
