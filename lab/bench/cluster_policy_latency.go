package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/source/kube"
)

// ClusterPolicyLatencyPoint is one ClusterNetworkPolicy stage of `bench
// policy-latency --cluster-policies`: the CNP edits' times in
// PolicyEdit*, the label changes' in Label*.
type ClusterPolicyLatencyPoint struct {
	ClusterPolicies int `json:"cluster_policies"`
	PolicyChangeTimes
	OwnCPU  *PolicyChangeTimes `json:"agent_own_cpu,omitempty"`
	Entries int                `json:"entries"`
	HeapMB  float64            `json:"agent_live_heap_mb"`
}

// ClusterPolicyLatencyReport is what `bench policy-latency
// --cluster-policies` writes (cluster-policy-latency.*): the
// NetworkPolicy stages of the same session (the base the
// ClusterNetworkPolicies are added to) and the ClusterNetworkPolicy stages.
type ClusterPolicyLatencyReport struct {
	Commit     string                      `json:"commit"`
	MeasuredAt string                      `json:"measured_at"`
	Machine    string                      `json:"machine"`
	Command    string                      `json:"command"`
	Scale      string                      `json:"scale"`
	Changes    int                         `json:"changes_per_kind"`
	Base       []PolicyLatencyPoint        `json:"network_policy_stages"`
	Points     []ClusterPolicyLatencyPoint `json:"points"`
	// KubeNetworkPolicies: what sigs.k8s.io/kube-network-policies did
	// against the same API server in the same session.
	KubeNetworkPolicies *KNPAttempt `json:"kube_network_policies,omitempty"`
}

// clusterLatencyTarget: a ClusterNetworkPolicy change enforced within
// 100 ms of its API write, p99 (issue 71).
const clusterLatencyTarget = 100.0

// runClusterPolicyStages creates the ClusterNetworkPolicies stage by stage
// (the CRD installed), after the NetworkPolicy stages, and times CNP
// edits and label changes at each.
func runClusterPolicyStages(ctx context.Context, cfg PolicyLatencyConfig, env *kubeenv.Env, maps *cube.Maps, a *agentProc, rep *ClusterPolicyLatencyReport) error {
	d, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	cnps := d.Resource(kube.ClusterNetworkPolicies)
	create := func(p *cnpv1.ClusterNetworkPolicy) error {
		u, err := toUnstructured(p)
		if err != nil {
			return err
		}
		_, err = cnps.Create(ctx, u, metav1.CreateOptions{})
		return err
	}
	update := func(p *cnpv1.ClusterNetworkPolicy) error {
		old, err := cnps.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		u, err := toUnstructured(p)
		if err != nil {
			return err
		}
		u.SetResourceVersion(old.GetResourceVersion())
		_, err = cnps.Update(ctx, u, metav1.UpdateOptions{})
		return err
	}
	if err := create(latencyCNPProbe()); err != nil {
		return err
	}
	created, edits := 0, 0
	for _, n := range cfg.ClusterPolicies {
		fmt.Fprintf(cfg.Log, "policy-latency: creating ClusterNetworkPolicies up to %d\n", n)
		for k := created; k < n; k++ {
			if err := create(latencyClusterPolicy(k)); err != nil {
				return fmt.Errorf("ClusterNetworkPolicy %d: %w", k, err)
			}
		}
		created = n
		// Created: an edit after them all is enforced (the agent takes
		// the changes in order).
		src, dst := latencyCNPPeers(0)
		if err := update(latencyCNPEdit(0, 39999, cnpv1.ClusterNetworkPolicyRuleActionAccept)); err != nil {
			return err
		}
		if err := waitAllowed(maps, src, dst, 39999, true, 5*time.Minute); err != nil {
			return fmt.Errorf("the ClusterNetworkPolicies were not enforced: %w", err)
		}
		if err := update(latencyClusterPolicy(0)); err != nil {
			return err
		}
		if err := waitAllowed(maps, src, dst, 39999, false, 5*time.Minute); err != nil {
			return err
		}
		pt := ClusterPolicyLatencyPoint{ClusterPolicies: n, HeapMB: a.liveHeapMB(),
			Entries: mapLen(maps.Map(policy.MapRules)) + mapLen(maps.Map(policy.MapEntries))}
		measure := func(t *PolicyChangeTimes) error {
			return measureCNPChanges(ctx, cfg, env.Client, maps, a, n, update, &edits, t)
		}
		if err := measure(&pt.PolicyChangeTimes); err != nil {
			return err
		}
		logCNPChanges(cfg.Log, n, "", pt.PolicyChangeTimes)
		if numCPU() >= 2 && !cfg.NoOwnCPU {
			own := &PolicyChangeTimes{}
			if err := onOwnCPU(env, a, func() error { return measure(own) }); err != nil {
				return err
			}
			pt.OwnCPU = own
			logCNPChanges(cfg.Log, n, " (agent on its own CPU)", *own)
		}
		rep.Points = append(rep.Points, pt)
	}
	return nil
}

func logCNPChanges(w io.Writer, n int, how string, t PolicyChangeTimes) {
	fmt.Fprintf(w, "policy-latency: %d ClusterNetworkPolicies%s: CNP edit p50 %.1f p99 %.1f ms, label p50 %.1f p99 %.1f ms, agent p50 %.2f p99 %.2f ms\n",
		n, how, t.PolicyEditP50, t.PolicyEditP99, t.LabelP50, t.LabelP99, t.SyncP50, t.SyncP99)
}

// measureCNPChanges times cfg.Changes pairs of CNP edits (an Admin
// policy's ingress rule rewritten to Accept a port no rule names, then
// to Deny it) and cfg.Changes pairs of label changes (a pod labelled
// into the probe policy's peers, then out), each until policy.MapsAllow
// answers the new way.
func measureCNPChanges(ctx context.Context, cfg PolicyLatencyConfig, c kubernetes.Interface, maps *cube.Maps, a *agentProc, n int,
	update func(*cnpv1.ClusterNetworkPolicy) error, edits *int, pt *PolicyChangeTimes) error {
	before := scrapeHistogram(a.metrics, "netcube_policy_sync_seconds")
	writes := scrapePolicyWrites(a.metrics)
	var editMS, relabelMS []float64
	for i := range cfg.Changes {
		k := 2 * rand.IntN((n+1)/2) // an Admin policy
		port := 40000 + *edits%20000
		*edits++
		src, dst := latencyCNPPeers(k)
		for _, step := range []struct {
			action cnpv1.ClusterNetworkPolicyRuleAction
			want   bool
		}{{cnpv1.ClusterNetworkPolicyRuleActionAccept, true}, {cnpv1.ClusterNetworkPolicyRuleActionDeny, false}} {
			t0 := time.Now()
			if err := update(latencyCNPEdit(k, port, step.action)); err != nil {
				return err
			}
			if err := waitAllowed(maps, src, dst, uint16(port), step.want, 30*time.Second); err != nil {
				return fmt.Errorf("CNP edit %d (%s): %w", i, step.action, err)
			}
			editMS = append(editMS, ms(time.Now().Sub(t0)))
		}
		if err := update(latencyClusterPolicy(k)); err != nil { // as it was
			return err
		}
		ns := latencyNS(k % 3)
		for _, on := range []bool{true, false} {
			pod, err := c.CoreV1().Pods(ns).Get(ctx, latencyPodName(1), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if on {
				pod.Labels["role"] = "cnp-prober"
			} else {
				delete(pod.Labels, "role")
			}
			t0 := time.Now()
			if _, err := c.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
				return err
			}
			if err := waitAllowed(maps, latencyPodIP(k%3, 1), latencyPodIP(k%3, 0), cnpProbePort, on, 30*time.Second); err != nil {
				return fmt.Errorf("label change %d: %w", i, err)
			}
			relabelMS = append(relabelMS, ms(time.Now().Sub(t0)))
		}
		if (i+1)%25 == 0 {
			fmt.Fprintf(cfg.Log, "policy-latency: %d ClusterNetworkPolicies: %d/%d change pairs of each kind\n", n, i+1, cfg.Changes)
		}
	}
	after := scrapeHistogram(a.metrics, "netcube_policy_sync_seconds")
	if passes := after[1e9] - before[1e9]; passes > 0 {
		pt.WritesPerPass = (scrapePolicyWrites(a.metrics) - writes) / passes
	}
	slices.Sort(editMS)
	slices.Sort(relabelMS)
	pt.PolicyEditP50, pt.PolicyEditP99 = quantile(editMS, 0.5), quantile(editMS, 0.99)
	pt.LabelP50, pt.LabelP99 = quantile(relabelMS, 0.5), quantile(relabelMS, 0.99)
	pt.SyncP50, pt.SyncP99 = histQuantile(before, after, 0.5)*1e3, histQuantile(before, after, 0.99)*1e3
	return nil
}

func toUnstructured(p *cnpv1.ClusterNetworkPolicy) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func (r *ClusterPolicyLatencyReport) write(dir string) error {
	return writeReportFiles(dir, "cluster-policy-latency", r, r.Markdown(), r.plot())
}

func (r *ClusterPolicyLatencyReport) plot() string {
	var sizes []int
	edit, label, agent := series{name: "CNP edit, write -> enforced"}, series{name: "label change, write -> enforced"}, series{name: "agent: compile + map writes"}
	target := series{name: "target: 100 ms", dashed: true}
	for _, p := range r.Points {
		sizes = append(sizes, p.ClusterPolicies)
		edit.ys = append(edit.ys, p.PolicyEditP99)
		label.ys = append(label.ys, p.LabelP99)
		agent.ys = append(agent.ys, p.SyncP99)
		target.ys = append(target.ys, clusterLatencyTarget)
	}
	return svgPlot("ClusterNetworkPolicy change p99 (ms)", "ClusterNetworkPolicies", sizes, []series{edit, label, agent, target})
}

// Markdown renders the report.
func (r *ClusterPolicyLatencyReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# ClusterNetworkPolicy: from a change to its enforcement\n\n")
	fmt.Fprintf(&b, "Measured at netcube commit `%s` on %s, %s, by `%s`.\n\n", r.Commit, r.MeasuredAt, r.Machine, r.Command)
	fmt.Fprintf(&b, "%s, in a real kube-apiserver (with etcd) with the chart's ClusterNetworkPolicy CRD installed; the agent a real process watching it, its maps in the kernel. "+
		"First the NetworkPolicy stages (below), then the ClusterNetworkPolicies (`latencyClusterPolicy` in `lab/bench/cluster_policies.go`: half Admin, half Baseline, each "+
		"selecting an app in the namespaces of a team, one ingress and one egress rule with apps as peers, Deny, Accept and Pass, on ports of their own) "+
		"are created stage by stage in the same session, and at each stage each change is timed from the API write (the client's call returning) until the node's maps "+
		"answer the new way (`policy.MapsAllow`, which reads the tier sets' deny entries too, polled every 200 µs): %d pairs of CNP edits (an Admin policy's rule "+
		"rewritten to Accept a port no rule names, then to Deny it) and %d pairs of label changes (a pod labelled into the peers of the Admin tier's first policy, "+
		"which accepts them on a port nothing else allows, then out: a new identity each time).\n\n", r.Scale, r.Changes, r.Changes)
	fmt.Fprintf(&b, "Target: write -> enforced p99 < %.0f ms.\n\n", clusterLatencyTarget)
	row := func(n int, t PolicyChangeTimes, entries string) {
		fmt.Fprintf(&b, "| %d | %s | %.1f / %.1f | %s | %.1f / %.1f | %s | %.2f / %.2f | %.0f |\n", n, entries,
			t.PolicyEditP50, t.PolicyEditP99, met(t.PolicyEditP99 < clusterLatencyTarget),
			t.LabelP50, t.LabelP99, met(t.LabelP99 < clusterLatencyTarget), t.SyncP50, t.SyncP99, t.WritesPerPass)
	}
	b.WriteString("| ClusterNetworkPolicies | map entries | CNP edit p50 / p99 ms | target | label change p50 / p99 ms | target | agent: compile + map writes p50 / p99 ms | map writes per pass |\n")
	b.WriteString("|---:|---:|---:|---|---:|---|---:|---:|\n")
	for _, p := range r.Points {
		row(p.ClusterPolicies, p.PolicyChangeTimes, fmt.Sprint(p.Entries))
	}
	b.WriteString("\n![p99 against the number of ClusterNetworkPolicies](plots/cluster-policy-latency.svg)\n\n")
	b.WriteString("The agent's figure is its histogram `netcube_policy_sync_seconds` over the stage's changes (interpolated in buckets from 50 µs by factors of √2): " +
		"a change computes again the tier sets' functions whose inputs it changed (pkg/cubes/policy/tiers_memo.go): an edit, those of the peers the edited rules name in the sets " +
		"the policy selects; a label change, the columns of the pod's old and new identity. The API server, etcd and the probe share this machine's two CPUs with the agent.\n\n")
	if len(r.Points) > 0 && r.Points[0].OwnCPU != nil {
		b.WriteString("## The agent on its own CPU\n\nAt each stage, right after the round above, as many changes with the agent bound to the last CPU and the API server, etcd and this benchmark to the others.\n\n")
		b.WriteString("| ClusterNetworkPolicies | map entries | CNP edit p50 / p99 ms | target | label change p50 / p99 ms | target | agent: compile + map writes p50 / p99 ms | map writes per pass |\n")
		b.WriteString("|---:|---:|---:|---|---:|---|---:|---:|\n")
		for _, p := range r.Points {
			if p.OwnCPU != nil {
				row(p.ClusterPolicies, *p.OwnCPU, fmt.Sprint(p.Entries))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("## The NetworkPolicy stages before them\n\n")
	b.WriteString("| NetworkPolicies | map entries | policy edit p50 / p99 ms | label change p50 / p99 ms | agent p50 / p99 ms |\n|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Base {
		fmt.Fprintf(&b, "| %d | %d | %.1f / %.1f | %.1f / %.1f | %.2f / %.2f |\n", p.Policies, p.Entries, p.PolicyEditP50, p.PolicyEditP99, p.LabelP50, p.LabelP99, p.SyncP50, p.SyncP99)
	}
	b.WriteString("\n")
	knpMarkdown(&b, r.KubeNetworkPolicies)
	b.WriteString("The machine is shared and noisy: compare figures of one run.\n")
	return b.String()
}
