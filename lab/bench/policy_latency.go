package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// PolicyLatencyConfig configures `netcube-lab bench policy-latency`.
type PolicyLatencyConfig struct {
	Namespaces, PodsPerNS int
	// PoliciesPerNS are the stages, ascending: the policies of each
	// namespace are created up to each count in turn, and the changes
	// timed at each (one session, one agent, one API server).
	PoliciesPerNS []int
	Changes       int // of each kind, per stage
	BinDir        string
	OutDir        string // policy-latency.{json,md} and plots/; "": none
	Log           io.Writer
	// ClusterPolicies, when set, are ClusterNetworkPolicy stages,
	// ascending, after the NetworkPolicy stages (cluster_policy_latency.go);
	// the report is then cluster-policy-latency.* (and the agent's work
	// alone is not measured).
	ClusterPolicies []int
	// KubeNetworkPolicies: the directory holding kube-network-policies,
	// run against the same API server at the end (knp.go).
	KubeNetworkPolicies string
	// NoOwnCPU skips each stage's second round, the agent on a CPU of
	// its own.
	NoOwnCPU bool
}

// PolicyLatencyReport is what `netcube-lab bench policy-latency` writes.
type PolicyLatencyReport struct {
	Commit     string    `json:"commit"`
	MeasuredAt time.Time `json:"measured_at"`
	Machine    string    `json:"machine"`
	Command    string    `json:"command"`
	Scale      string    `json:"scale"`
	Changes    int       `json:"changes_per_kind"`
	// The agent's live heap with the pods alone.
	HeapNoPoliciesMB float64              `json:"agent_live_heap_no_policies_mb"`
	Points           []PolicyLatencyPoint `json:"points"`
	// The agent's work per change alone, in process (measurePolicyWork).
	Work []PolicyWorkPoint `json:"agent_work_alone"`
	// Cluster: the ClusterNetworkPolicy stages, when run (their own report).
	Cluster *ClusterPolicyLatencyReport `json:"-"`
}

// PolicyLatencyPoint is one stage: the figures with Policies policies,
// the changes timed with every process free to run on any CPU, and again
// with the agent on a CPU of its own (OwnCPU).
type PolicyLatencyPoint struct {
	Policies int `json:"policies"`
	PolicyChangeTimes
	OwnCPU *PolicyChangeTimes `json:"agent_own_cpu,omitempty"`
	// Memory: the node's policy map entries and the agent's live heap.
	Identities int     `json:"identities"`
	Endpoints  int     `json:"endpoints"`
	Entries    int     `json:"entries"`
	HeapMB     float64 `json:"agent_live_heap_mb"`
	// KBPerAddedPolicy is what the policies this stage added grew the
	// heap by, per policy, over the stage before; none for the first
	// stage: its growth over the pods alone holds what having any policy
	// costs (the informer's and the compiler's fixed state), and its few
	// policies are within the heap's noise.
	KBPerAddedPolicy  *float64 `json:"agent_kb_per_added_policy,omitempty"`
	MapBytesPerPolicy float64  `json:"map_bytes_per_policy"`
}

// kbPerAddedPolicy is pt's KBPerAddedPolicy, the stages before it
// being before.
func kbPerAddedPolicy(before []PolicyLatencyPoint, pt PolicyLatencyPoint) *float64 {
	if len(before) == 0 {
		return nil
	}
	prev := before[len(before)-1]
	kb := (pt.HeapMB - prev.HeapMB) * 1024 / float64(pt.Policies-prev.Policies)
	return &kb
}

// PolicyChangeTimes are one round of a stage's changes.
type PolicyChangeTimes struct {
	// API write (the client's call returns) -> the change is what the
	// node's maps answer (policy.MapsAllow), polled every 200 µs.
	PolicyEditP50 float64 `json:"policy_edit_write_to_enforced_p50_ms"`
	PolicyEditP99 float64 `json:"policy_edit_write_to_enforced_p99_ms"`
	LabelP50      float64 `json:"label_change_write_to_enforced_p50_ms"`
	LabelP99      float64 `json:"label_change_write_to_enforced_p99_ms"`
	// The agent's own figure over the same changes: compiling what
	// changed and writing it (netcube_policy_sync_seconds).
	SyncP50 float64 `json:"agent_sync_p50_ms"`
	SyncP99 float64 `json:"agent_sync_p99_ms"`
	// The policy maps' writes and deletes per pass, on average
	// (netcube_map_operations_total): what the changes touched.
	WritesPerPass float64 `json:"map_writes_per_pass"`
}

const latencyNode = "bench-node"

// RunPolicyLatency measures how long a NetworkPolicy change takes from
// the API write to the datapath's maps on a node, with Namespaces x
// PodsPerNS pods (half of them on the agent's node) and, stage by stage,
// each count of PoliciesPerNS policies per namespace in a real
// kube-apiserver, the agent a real process watching it: policy edits (a
// policy's rule rewritten to allow a new port) and label changes (a pod
// labelled into, then out of, a policy's peers), each timed until
// policy.MapsAllow answers the new way.
func RunPolicyLatency(cfg PolicyLatencyConfig) (*PolicyLatencyReport, error) {
	if len(cfg.PoliciesPerNS) == 0 || !slices.IsSorted(cfg.PoliciesPerNS) || cfg.PoliciesPerNS[0] < 1 {
		return nil, fmt.Errorf("policies per namespace %v: want ascending counts, the first at least 1", cfg.PoliciesPerNS)
	}
	if cfg.Namespaces < 2 || cfg.PodsPerNS < 3 {
		return nil, fmt.Errorf("%d namespaces of %d pods: the changes need at least 2 of 3", cfg.Namespaces, cfg.PodsPerNS)
	}
	host, _ := os.Hostname()
	rep := &PolicyLatencyReport{Commit: Commit(), MeasuredAt: time.Now().UTC(), Changes: cfg.Changes,
		Machine: fmt.Sprintf("%s (kernel %s, %d CPUs)", host, kernelRelease(), runtime.NumCPU()),
		Command: "netcube-lab bench policy-latency " + strings.Join(os.Args[3:], " "),
		Scale:   fmt.Sprintf("%d pods in %d namespaces (half the pods on the measured node)", cfg.Namespaces*cfg.PodsPerNS, cfg.Namespaces)}

	if len(cfg.ClusterPolicies) > 0 && (!slices.IsSorted(cfg.ClusterPolicies) || cfg.ClusterPolicies[0] < 1 || cfg.Namespaces < 3) {
		return nil, fmt.Errorf("cluster policies %v in %d namespaces: want ascending counts, the first at least 1, and 3 namespaces", cfg.ClusterPolicies, cfg.Namespaces)
	}
	// The agent's work alone first, before the API server starts.
	for _, perNS := range cfg.PoliciesPerNS {
		if len(cfg.ClusterPolicies) > 0 {
			break // the NetworkPolicy report's
		}
		spreads := []policy.ScaleSpread{policy.SpreadSame}
		if perNS > 10 {
			spreads = append(spreads, policy.SpreadOther)
		}
		for _, spread := range spreads {
			fmt.Fprintf(cfg.Log, "policy-latency: the agent's work alone, %d policies, spread %s\n", cfg.Namespaces*perNS, spread)
			pts, err := measurePolicyWork(cfg.Namespaces, cfg.PodsPerNS, perNS, spread, cfg.Changes)
			if err != nil {
				return nil, err
			}
			rep.Work = append(rep.Work, pts...)
		}
	}

	ctx := context.Background()
	dir, err := os.MkdirTemp("", "netcube-bench-policy-latency-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	env, err := kubeenv.Start(kubeenv.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	c := env.Client
	if len(cfg.ClusterPolicies) > 0 {
		if err := kubeenv.InstallCRDs(env.Config); err != nil {
			return nil, err
		}
	}

	fmt.Fprintf(cfg.Log, "policy-latency: creating %d namespaces and %d pods\n", cfg.Namespaces, cfg.Namespaces*cfg.PodsPerNS)
	for n := range cfg.Namespaces {
		if err := createLatencyPods(ctx, c, n, cfg.PodsPerNS); err != nil {
			return nil, err
		}
	}
	pins := filepath.Join(datapath.BPFFS, fmt.Sprintf("netcube-bench-policy-%d", os.Getpid()))
	_ = datapath.Unpin(pins)
	defer datapath.Unpin(pins)
	a, err := startBenchAgent(SyncConfig{BinDir: cfg.BinDir}, env, pins, "policy", "--node-name", latencyNode)
	if err != nil {
		return nil, err
	}
	defer a.stop()
	time.Sleep(time.Second) // the pods' initial sync settles
	rep.HeapNoPoliciesMB = a.liveHeapMB()
	maps, closeMaps, err := datapath.OpenPinned(pins)
	if err != nil {
		return nil, err
	}
	defer closeMaps()

	created, edits := 0, 0
	for _, perNS := range cfg.PoliciesPerNS {
		total := cfg.Namespaces * perNS
		fmt.Fprintf(cfg.Log, "policy-latency: creating NetworkPolicies up to %d\n", total)
		for n := range cfg.Namespaces {
			for k := created; k < perNS; k++ {
				if _, err := c.NetworkingV1().NetworkPolicies(latencyNS(n)).Create(ctx, latencyPolicy(n, k, 1000+k), metav1.CreateOptions{}); err != nil {
					return nil, err
				}
			}
		}
		created = perNS
		// Created: the last policy's rule is enforced.
		last := perNS - 1
		src, dst := latencyPeers(cfg.Namespaces-1, last)
		if err := waitAllowed(maps, src, dst, uint16(1000+last), true, 5*time.Minute); err != nil {
			return nil, fmt.Errorf("the policies were not enforced: %w", err)
		}
		time.Sleep(2 * time.Second)
		pt := PolicyLatencyPoint{Policies: total, HeapMB: a.liveHeapMB()}
		pt.Identities, pt.Endpoints, pt.Entries = mapLen(maps.Map(policy.MapHosts))+mapLen(maps.Map(policy.MapPeers)), mapLen(maps.Map(policy.MapEndpoints)), mapLen(maps.Map(policy.MapRules))+mapLen(maps.Map(policy.MapEntries))
		entryBytes := float64(maps.Map(policy.MapEntries).KeySize() + maps.Map(policy.MapEntries).ValueSize())
		pt.MapBytesPerPolicy = float64(pt.Entries) * entryBytes / float64(total)
		pt.KBPerAddedPolicy = kbPerAddedPolicy(rep.Points, pt)
		if err := measurePolicyChanges(ctx, cfg, c, maps, a, perNS, &edits, &pt.PolicyChangeTimes); err != nil {
			return nil, err
		}
		logChanges(cfg.Log, total, "", pt.PolicyChangeTimes)
		if numCPU() >= 2 && !cfg.NoOwnCPU {
			own := &PolicyChangeTimes{}
			if err := onOwnCPU(env, a, func() error { return measurePolicyChanges(ctx, cfg, c, maps, a, perNS, &edits, own) }); err != nil {
				return nil, err
			}
			pt.OwnCPU = own
			logChanges(cfg.Log, total, " (agent on its own CPU)", *own)
		}
		rep.Points = append(rep.Points, pt)
	}
	if len(cfg.ClusterPolicies) > 0 {
		crep := &ClusterPolicyLatencyReport{Commit: rep.Commit, MeasuredAt: rep.MeasuredAt.Format("2006-01-02"), Machine: rep.Machine,
			Command: rep.Command, Scale: rep.Scale, Changes: cfg.Changes, Base: rep.Points}
		if err := runClusterPolicyStages(ctx, cfg, env, maps, a, crep); err != nil {
			return nil, err
		}
		if cfg.KubeNetworkPolicies != "" {
			crep.KubeNetworkPolicies = tryKNPOnAPI(env, cfg.KubeNetworkPolicies, latencyNode, cfg.Log)
		}
		rep.Cluster = crep
		if cfg.OutDir != "" {
			if err := crep.write(cfg.OutDir); err != nil {
				return nil, err
			}
		}
		return rep, nil
	}
	if cfg.OutDir != "" {
		if err := rep.write(cfg.OutDir); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// measurePolicyChanges times cfg.Changes policy edits and label changes
// with perNS policies per namespace into pt; edits counts the edits made
// so far (each allows a port no rule had).
func measurePolicyChanges(ctx context.Context, cfg PolicyLatencyConfig, c kubernetes.Interface, maps *cube.Maps, a *agentProc,
	perNS int, edits *int, pt *PolicyChangeTimes) error {
	before := scrapeHistogram(a.metrics, "netcube_policy_sync_seconds")
	writes := scrapePolicyWrites(a.metrics)
	var editMS, relabelMS []float64
	for i := range cfg.Changes {
		// A policy edit: the rule now allows a port no rule had.
		n, k := rand.IntN(cfg.Namespaces), rand.IntN(perNS)
		port := uint16(20000 + *edits)
		*edits++
		src, dst := latencyPeers(n, k)
		old, err := c.NetworkingV1().NetworkPolicies(latencyNS(n)).Get(ctx, latencyPolicyName(k), metav1.GetOptions{})
		if err != nil {
			return err
		}
		p := latencyPolicy(n, k, int(port))
		p.ResourceVersion = old.ResourceVersion
		t0 := time.Now()
		if _, err := c.NetworkingV1().NetworkPolicies(latencyNS(n)).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if err := waitAllowed(maps, src, dst, port, true, 30*time.Second); err != nil {
			return fmt.Errorf("policy edit %d: %w", i, err)
		}
		editMS = append(editMS, ms(time.Since(t0)))

		// A label change: the pod gains, then loses, the label of a peer
		// the probe policy of its namespace allows.
		on := i%2 == 0
		pod, err := c.CoreV1().Pods(latencyNS(n)).Get(ctx, latencyPodName(1), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if on {
			pod.Labels["role"] = "prober"
		} else {
			delete(pod.Labels, "role")
		}
		t0 = time.Now()
		if _, err := c.CoreV1().Pods(latencyNS(n)).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return err
		}
		if err := waitAllowed(maps, latencyPodIP(n, 1), latencyPodIP(n, 0), probePort, on, 30*time.Second); err != nil {
			return fmt.Errorf("label change %d: %w", i, err)
		}
		relabelMS = append(relabelMS, ms(time.Since(t0)))
		if on { // leave every namespace's pod as it was
			pod, err := c.CoreV1().Pods(latencyNS(n)).Get(ctx, latencyPodName(1), metav1.GetOptions{})
			if err != nil {
				return err
			}
			delete(pod.Labels, "role")
			if _, err := c.CoreV1().Pods(latencyNS(n)).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
				return err
			}
			if err := waitAllowed(maps, latencyPodIP(n, 1), latencyPodIP(n, 0), probePort, false, 30*time.Second); err != nil {
				return err
			}
		}
		if (i+1)%50 == 0 {
			fmt.Fprintf(cfg.Log, "policy-latency: %d policies: %d/%d changes of each kind\n", cfg.Namespaces*perNS, i+1, cfg.Changes)
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

func logChanges(w io.Writer, policies int, how string, t PolicyChangeTimes) {
	fmt.Fprintf(w, "policy-latency: %d policies%s: edit p50 %.1f p99 %.1f ms, label p50 %.1f p99 %.1f ms, agent p50 %.2f p99 %.2f ms\n",
		policies, how, t.PolicyEditP50, t.PolicyEditP99, t.LabelP50, t.LabelP99, t.SyncP50, t.SyncP99)
}

// onOwnCPU runs measure with the agent bound to the last CPU and the API
// server, etcd and this process (the writes, the probe) to the others, as
// on a node, where the control plane is elsewhere; then frees them all.
func onOwnCPU(env *kubeenv.Env, a *agentProc, measure func() error) (err error) {
	last := numCPU() - 1
	others := make([]int, last)
	for i := range others {
		others[i] = i
	}
	procs := []int{env.APIServerPID(), env.EtcdPID(), 0}
	defer func() {
		for _, pid := range append(procs, a.cmd.Process.Pid) {
			if e := pinProcess(pid); e != nil && err == nil {
				err = e
			}
		}
	}()
	if err := pinProcess(a.cmd.Process.Pid, last); err != nil {
		return err
	}
	for _, pid := range procs {
		if err := pinProcess(pid, others...); err != nil {
			return err
		}
	}
	return measure()
}

// probePort is what each namespace's probe policy allows from role=prober.
const probePort = 9999

func latencyNS(n int) string         { return fmt.Sprintf("ns%d", n) }
func latencyPodName(i int) string    { return fmt.Sprintf("p%d", i) }
func latencyPolicyName(k int) string { return fmt.Sprintf("pol%d", k) }
func latencyPodIP(n, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 200, byte(n), byte(i + 1)})
}
func latencyApp(i int) string { return fmt.Sprintf("a%d", i%5) }
func latencyPeers(n, k int) (src, dst netip.Addr) {
	// Policy k selects app a(k%5) and allows app a((k+1)%5). Pod i has app
	// a(i%5) and is on the measured node when i is even: pod k%5 or
	// k%5+5, whichever is even, is a selected local pod.
	d := k % 5
	if d%2 == 1 {
		d += 5
	}
	return latencyPodIP(n, (k+1)%5), latencyPodIP(n, d)
}

// createLatencyPods creates namespace n (and its service account: there is
// no controller manager), its pods, and its probe policy.
func createLatencyPods(ctx context.Context, c kubernetes.Interface, n, pods int) error {
	ns := latencyNS(n)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"team": fmt.Sprintf("t%d", n%3)}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range pods {
		node := latencyNode
		if i%2 == 1 {
			node = "other-node"
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: latencyPodName(i), Namespace: ns,
			Labels: map[string]string{"app": latencyApp(i), "tier": fmt.Sprintf("t%d", i%2)}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
		created, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		ip := latencyPodIP(n, i).String()
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	port := intstr.FromInt32(probePort)
	probe := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": latencyApp(0)}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "prober"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}}}}}
	_, err := c.NetworkingV1().NetworkPolicies(ns).Create(ctx, probe, metav1.CreateOptions{})
	return err
}

// latencyPolicy is policy k of namespace n, as policy.ScaleCluster shapes
// its policies, allowing port (numbered; every third a range from it, one
// in four also from the namespaces of a team, one in ten also an IP block).
func latencyPolicy(n, k, port int) *networkingv1.NetworkPolicy {
	p := intstr.FromInt32(int32(port))
	pp := networkingv1.NetworkPolicyPort{Port: &p}
	if k%3 == 1 {
		end := int32(port + 10)
		pp.EndPort = &end
	}
	peers := []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": latencyApp(k + 1)}}}}
	if k%4 == 0 {
		peers = append(peers, networkingv1.NetworkPolicyPeer{
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": latencyApp(k + 1)}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("t%d", k%3)}}})
	}
	if k%10 == 0 {
		peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{
			CIDR: fmt.Sprintf("192.168.%d.0/24", k%256), Except: []string{fmt.Sprintf("192.168.%d.128/25", k%256)}}})
	}
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: latencyPolicyName(k), Namespace: latencyNS(n)},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": latencyApp(k)}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: []networkingv1.NetworkPolicyPort{pp}}}}}
}

// scrapePolicyWrites sums the agent's writes and deletes to the policy
// maps (netcube_map_operations_total of the pol_* maps).
func scrapePolicyWrites(addr string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	re := regexp.MustCompile(`^netcube_map_operations_total\{[^}]*map="pol_[^"]*"[^}]*\} ([0-9.e+]+)$`)
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			sum += v
		}
	}
	return sum
}

// waitAllowed polls the maps until src -> dst:port (TCP) is allowed (or
// denied) as want.
func waitAllowed(m *cube.Maps, src, dst netip.Addr, port uint16, want bool, timeout time.Duration) error {
	start := time.Now()
	for {
		got, err := policy.MapsAllow(m, src, dst, model.TCP, port)
		if err != nil {
			return err
		}
		if got == want {
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("%s -> %s:%d not %s after %s", src, dst, port, map[bool]string{true: "allowed", false: "denied"}[want], timeout)
		}
		time.Sleep(200 * time.Microsecond) // not a busy loop: the agent shares the machine's two CPUs
	}
}

// liveHeapMB is the agent's live Go heap: a heap profile forces a
// collection, then the metric reads what survived it.
func (a *agentProc) liveHeapMB() float64 {
	if resp, err := http.Get("http://" + a.metrics + "/debug/pprof/heap?gc=1"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := http.Get("http://" + a.metrics + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "go_memstats_heap_alloc_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f / (1 << 20)
		}
	}
	return 0
}

// mapLen counts a map's entries.
func mapLen(m cube.Map) int {
	n := 0
	it := m.Iterate()
	var k, v []byte
	for it.Next(&k, &v) {
		n++
	}
	return n
}

func (r *PolicyLatencyReport) write(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "plots"), 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "policy-latency.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "plots", "policy-latency.svg"), []byte(r.plot()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "policy-latency.md"), []byte(r.Markdown()), 0o644)
}

// plot draws the p99s against the number of policies.
func (r *PolicyLatencyReport) plot() string {
	var sizes []int
	edit, label, agent := series{name: "policy edit, write -> enforced"}, series{name: "label change, write -> enforced"},
		series{name: "agent: compile + map writes"}
	alone := series{name: "agent alone: new identity (class, same spread)"}
	own := series{name: "agent on its own CPU: compile + map writes"}
	for _, p := range r.Points {
		sizes = append(sizes, p.Policies)
		edit.ys = append(edit.ys, p.PolicyEditP99)
		label.ys = append(label.ys, p.LabelP99)
		agent.ys = append(agent.ys, p.SyncP99)
		if p.OwnCPU != nil {
			own.ys = append(own.ys, p.OwnCPU.SyncP99)
		}
		for _, w := range r.Work {
			if w.Policies == p.Policies && w.Spread == string(policy.SpreadSame) && w.Change == "class" {
				alone.ys = append(alone.ys, w.TotalP99)
			}
		}
	}
	all := []series{edit, label, agent}
	for _, s := range []series{own, alone} {
		if len(s.ys) == len(sizes) {
			all = append(all, s)
		}
	}
	return svgPlot("NetworkPolicy change p99 (ms)", "NetworkPolicies", sizes, all)
}

// ownCPUMarkdown renders the stages' second round, the agent on a CPU of
// its own.
func ownCPUMarkdown(b *strings.Builder, points []PolicyLatencyPoint, changes int) {
	if len(points) == 0 || points[0].OwnCPU == nil {
		return
	}
	b.WriteString("## The agent on its own CPU\n\n")
	fmt.Fprintf(b, "At each stage, right after the round above, %d more changes of each kind with the agent bound to the last CPU "+
		"and the API server, etcd and this benchmark (the writes, the probe) to the others, as on a node, whose agent "+
		"does not share its CPU with the control plane; the same agent process, the same session.\n\n", changes)
	b.WriteString("| NetworkPolicies | policy edit p50 / p99 ms | label change p50 / p99 ms | agent: compile + map writes p50 / p99 ms | map writes per pass | target: agent p99 < 5 ms |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---|\n")
	for _, p := range points {
		if o := p.OwnCPU; o != nil {
			fmt.Fprintf(b, "| %d | %.1f / %.1f | %.1f / %.1f | %.2f / %.2f | %.0f | %s |\n", p.Policies,
				o.PolicyEditP50, o.PolicyEditP99, o.LabelP50, o.LabelP99, o.SyncP50, o.SyncP99, o.WritesPerPass, met(o.SyncP99 < 5))
		}
	}
	b.WriteString("\n")
}

// Markdown renders the report.
func (r *PolicyLatencyReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# NetworkPolicy: from a change to its enforcement\n\n")
	fmt.Fprintf(&b, "Measured at netcube commit `%s` on %s, %s, by `%s`.\n\n", r.Commit, r.MeasuredAt.Format("2006-01-02"), r.Machine, r.Command)
	fmt.Fprintf(&b, "%s, in a real kube-apiserver (with etcd); the agent a real process watching it, its maps in the kernel. "+
		"The policies are created stage by stage, in one session with one agent, and at each stage "+
		"each change is timed from the API write (the client's call returning) until the node's maps answer the new way, "+
		"read with the datapath's own lookups (`policy.MapsAllow`, polled every 200 µs): %d policy edits (a rule rewritten to allow a port "+
		"no rule had) and %d label changes (a pod labelled into, or out of, the peers a policy allows: a new identity, "+
		"and the entries of every rule whose peers it matches).\n\n", r.Scale, r.Changes, r.Changes)
	b.WriteString("| NetworkPolicies | map entries | policy edit p50 / p99 ms | label change p50 / p99 ms | agent: compile + map writes p50 / p99 ms | map writes per pass | target: agent p99 < 5 ms |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---|\n")
	for _, p := range r.Points {
		fmt.Fprintf(&b, "| %d | %d | %.1f / %.1f | %.1f / %.1f | %.2f / %.2f | %.0f | %s |\n", p.Policies, p.Entries,
			p.PolicyEditP50, p.PolicyEditP99, p.LabelP50, p.LabelP99, p.SyncP50, p.SyncP99, p.WritesPerPass, met(p.SyncP99 < 5))
	}
	b.WriteString("\n![p99 against the number of policies](plots/policy-latency.svg)\n\n")
	b.WriteString("The agent's figure is from its histogram `netcube_policy_sync_seconds` (buckets from 50 µs by factors of √2, interpolated), " +
		"over every pass during the stage's changes: the compilation of what changed (`Compiler.Update`: a pod's own entries, the rules " +
		"whose peers a new or emptied identity matches, the edited policy) and the map writes of the keys that changed, " +
		"counted in the next column (writes and deletes of the policy maps per pass, from `netcube_map_operations_total`): " +
		"a label change here gives a pod a new identity, which every rule whose peers match it must name, so the writes grow " +
		"with the policies in that namespace and those with namespace selectors (a pod's entries are those of its rule set, shared " +
		"by this node's pods of its namespace with its labels and named ports). " +
		"The write -> enforced figures, and the agent's own, include waiting for the CPU: the API server, etcd and the probe share " +
		"this machine's two CPUs with the agent at the moment it compiles.\n\n")
	ownCPUMarkdown(&b, r.Points, r.Changes)
	workMarkdown(&b, r.Work, r.Changes)
	b.WriteString("## Memory\n\n")
	fmt.Fprintf(&b, "The agent's live Go heap (after a forced collection) with the pods alone: %.1f MB.\n\n", r.HeapNoPoliciesMB)
	b.WriteString("| NetworkPolicies | identity cache entries | endpoints | entries | entry bytes per policy | agent live heap MB | KB per policy added since the stage before |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		perPolicy := "–" // the first stage
		switch kb := p.KBPerAddedPolicy; {
		case kb != nil && *kb > 0:
			perPolicy = fmt.Sprintf("%.1f", *kb)
		case kb != nil:
			perPolicy = "below the heap's noise"
		}
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %.0f | %.1f | %s |\n", p.Policies, p.Identities, p.Endpoints, p.Entries,
			p.MapBytesPerPolicy, p.HeapMB, perPolicy)
	}
	b.WriteString("\nEntries: `pol_rules` (exact: one port, or every protocol) and `pol_entries` (port ranges); entry bytes: a key and value (the kernel's hash element or trie node adds its overhead). The heap per policy " +
		"holds the policies as converted, each policy's compiled entries per rule set, and the node's tables; it is the growth from one stage to the next over " +
		"the policies added, so the first stage has none: its growth over the pods alone also holds what having any policy costs (the policy informer's " +
		"and the compiler's own state), and its few policies are within the heap's noise.\n")
	return b.String()
}
