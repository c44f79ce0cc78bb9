package bench

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/model"
)

// The per-packet benchmark's ClusterNetworkPolicies convert without an
// error, select the client and the servers, and leave the measured
// connection allowed, decided by the tier sets; the near misses deny.
func TestBenchClusterPoliciesDecideTheMeasuredConnection(t *testing.T) {
	sb := &sandbox.Sandbox{Topology: sandbox.Layout(sandbox.Config{Name: "cnptest"}, "/sys/fs/cgroup")}
	cnps := benchClusterPolicies(100)
	if len(cnps) != 200 {
		t.Fatalf("%d policies, want 200", len(cnps))
	}
	cl := benchCluster(sb)
	if err := addClusterPolicies(cl, cnps); err != nil {
		t.Fatal(err)
	}
	client, same, cross := sb.Topology.Nodes[0].Pods[0], sb.Topology.Nodes[0].Pods[1], sb.Topology.Nodes[1].Pods[0]
	for _, n := range sb.Topology.Nodes[:2] {
		name := n.Name
		np := policy.NewCompiler().Compile(benchCluster(sb), func(p *model.Pod) bool { return p.Node == name }, []netip.Addr{n.IP4, n.IP6})
		c := policy.NewCompiler()
		t0 := time.Now()
		tb := c.Compile(cl, func(p *model.Pod) bool { return p.Node == name }, []netip.Addr{n.IP4, n.IP6})
		t.Logf("%s: %d entries, %d tier set entries, compiled in %s", name, len(tb.Entries), len(tb.Verdicts), time.Since(t0))
		if len(c.TierConflicts()) > 0 {
			t.Errorf("tier conflicts: %v", c.TierConflicts())
		}
		for _, dst := range []sandbox.Pod{same, cross} {
			if client.Node != name && dst.Node != name {
				continue // neither end's tables are this node's
			}
			for _, fam := range [][2]netip.Addr{{client.IP4, dst.IP4}, {client.IP6, dst.IP6}} {
				if !tb.Allows(fam[0], fam[1], model.TCP, podnetRRPort) {
					t.Errorf("%s: %s -> %s:%d denied with the ClusterNetworkPolicies", name, fam[0], fam[1], podnetRRPort)
				}
				if tb.Allows(fam[0], fam[1], model.TCP, podnetRRPort+1) {
					t.Errorf("%s: %s -> %s:%d (a near miss) allowed", name, fam[0], fam[1], podnetRRPort+1)
				}
			}
		}
		// The pods of this node have tier sets: endpoints NetworkPolicy
		// alone does not give them.
		for _, p := range []sandbox.Pod{client, same, cross} {
			if p.Node != name {
				continue
			}
			if tb.Endpoints[p.IP4].RuleSet == np.Endpoints[p.IP4].RuleSet {
				t.Errorf("%s: %s keeps its NetworkPolicy rule set: no tier set", name, p.Name)
			}
			if _, ok := tb.Endpoints[p.IP4]; !ok {
				t.Errorf("%s: %s has no endpoint", name, p.Name)
			}
		}
		// Another pod's ingress to the client: the last Baseline policy's
		// default deny.
		if name == client.Node && tb.Allows(same.IP4, client.IP4, model.TCP, 80) {
			t.Errorf("%s: a server reaches the client: the Baseline default deny is not in force", name)
		}
	}
}

func TestClusterMarkdownNamesTargetsAndKNP(t *testing.T) {
	r := &PolicyReport{Commit: "abc123", Runs: 3, DurationS: 3, ClusterScale: "100 Admin-tier and 100 Baseline-tier ClusterNetworkPolicies",
		Points: []PolicyPoint{{Family: "IPv4", Placement: "same-node", None: PolicyFigures{ConnPerSec: 100, RRP99: 20},
			Policies: PolicyFigures{ConnPerSec: 96, RRP99: 21}, Cluster: &PolicyFigures{ConnPerSec: 95, RRP99: 21.2}}},
		KubeNetworkPolicies: &KNPAttempt{Version: KNPVersion, Reason: "cannot run on this machine: no queue",
			Probe: NFTProbe{Netns: "p", Steps: []NFTStep{{Command: "nft add rule inet probe postrouting queue num 100 bypass", Output: "Error: Could not process rule: No such file or directory"}}}}}
	md := r.ClusterMarkdown()
	for _, want := range []string{"`abc123`", "| IPv4 same-node | 100 | 96 | 95 | 0.990 | met |", "cannot run on this machine: no queue", "No such file or directory", "plots/cluster-policy.svg"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
	if svg := r.clusterPlot(); !strings.Contains(svg, "IPv4 same-node") || !strings.Contains(svg, ">200<") {
		t.Errorf("the plot has no series or no 200:\n%s", svg)
	}
}

func TestKNPLogExcerpt(t *testing.T) {
	log := "I1207 17:00:00.1 1 controller.go:711] \"Syncing nftables rules\"\n" +
		"I1207 17:00:00.2 1 controller.go:925] \"syncing nftables rules\" error=\"no such file or directory\"\n" +
		"I1207 17:00:01.2 1 controller.go:925] \"syncing nftables rules\" error=\"no such file or directory\"\n" +
		"I1207 17:00:01.3 1 other.go:1] \"unrelated\"\n"
	got := knpLogExcerpt([]byte(log), 10)
	if len(got) != 2 {
		t.Fatalf("excerpt %q: want the two distinct nftables lines", got)
	}
	multi := "I1207 17:32:12.26 1 controller.go:925] \"syncing nftables rules\" error=<\n\tnetlink receive: no such file or directory\n >\nI1207 17:32:13 1 x.go:1] \"ok\"\n"
	if got := knpLogExcerpt([]byte(multi), 10); len(got) != 3 || !strings.Contains(got[1], "no such file") {
		t.Errorf("excerpt %q: want the multi-line value kept", got)
	}
}

// The change-latency benchmark's ClusterNetworkPolicies convert without
// an error, and its edits and label changes turn the connections it
// probes as it expects.
func TestLatencyClusterPoliciesEditsAnswer(t *testing.T) {
	nodes := []string{latencyNode, "other-node"}
	cl := policy.ScaleCluster(10, 20, 1, nodes)
	for n := range 10 {
		ns := cl.Namespaces[latencyNS(n)]
		ns.Labels[nsNameLabel] = ns.Name
	}
	const cnps = 100
	var all []*cnpv1.ClusterNetworkPolicy
	for k := range cnps {
		all = append(all, latencyClusterPolicy(k))
	}
	all = append(all, latencyCNPProbe())
	if err := addClusterPolicies(cl, all); err != nil {
		t.Fatal(err)
	}
	local := func(p *model.Pod) bool { return p.Node == latencyNode }
	host := []netip.Addr{netip.MustParseAddr("172.30.0.11")}
	c := policy.NewCompiler()
	t0 := time.Now()
	tb := c.Compile(cl, local, host)
	t.Logf("%d ClusterNetworkPolicies: %d tier set entries, compiled in %s", cnps, len(tb.Verdicts), time.Since(t0))
	for _, k := range []int{0, 2, 50, 98} {
		src, dst := latencyCNPPeers(k)
		for _, step := range []struct {
			action cnpv1.ClusterNetworkPolicyRuleAction
			want   bool
		}{{cnpv1.ClusterNetworkPolicyRuleActionAccept, true}, {cnpv1.ClusterNetworkPolicyRuleActionDeny, false}} {
			if err := addClusterPolicies(cl, []*cnpv1.ClusterNetworkPolicy{latencyCNPEdit(k, 40000+k, step.action)}); err != nil {
				t.Fatal(err)
			}
			tb := policy.NewCompiler().Compile(cl, local, host)
			if got := tb.Allows(src, dst, model.TCP, uint16(40000+k)); got != step.want {
				t.Errorf("policy %d edited to %s: %s -> %s:%d allowed %v, want %v", k, step.action, src, dst, 40000+k, got, step.want)
			}
		}
	}
	// The label change: p1 of ns0 labelled into the probe's peers.
	src, dst := latencyPodIP(0, 1), latencyPodIP(0, 0)
	if policy.NewCompiler().Compile(cl, local, host).Allows(src, dst, model.TCP, cnpProbePort) {
		t.Fatalf("%s -> %s:%d allowed before the label", src, dst, cnpProbePort)
	}
	id := model.PodID{Namespace: latencyNS(0), Name: latencyPodName(1)}
	p := *cl.Pods[id]
	p.Labels = map[string]string{"app": p.Labels["app"], "tier": p.Labels["tier"], "role": "cnp-prober"}
	cl.SetPod(id, &p)
	if !policy.NewCompiler().Compile(cl, local, host).Allows(src, dst, model.TCP, cnpProbePort) {
		t.Errorf("%s -> %s:%d denied with the label", src, dst, cnpProbePort)
	}
}

func TestClusterPolicyLatencyMarkdown(t *testing.T) {
	r := &ClusterPolicyLatencyReport{Commit: "abc123", Changes: 10, Points: []ClusterPolicyLatencyPoint{
		{ClusterPolicies: 10, PolicyChangeTimes: PolicyChangeTimes{PolicyEditP50: 4, PolicyEditP99: 9, LabelP50: 5, LabelP99: 120}},
		{ClusterPolicies: 100, PolicyChangeTimes: PolicyChangeTimes{PolicyEditP50: 5, PolicyEditP99: 12, LabelP50: 6, LabelP99: 20}}}}
	md := r.Markdown()
	for _, want := range []string{"`abc123`", "| 10 | 0 | 4.0 / 9.0 | met | 5.0 / 120.0 | **missed** |", "plots/cluster-policy-latency.svg"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
	if svg := r.plot(); !strings.Contains(svg, ">100<") {
		t.Errorf("the plot has no 100 on its axis")
	}
}
