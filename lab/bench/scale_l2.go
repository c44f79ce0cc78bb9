package bench

// `netcube-lab bench scale-l2`: what electing one L2 announcer per
// LoadBalancer IP costs the API server, and how fast an address moves
// when its announcer dies. N hollow agents (bench scale's, given
// --l2-heartbeat-addrs so that each runs the real election over UDP on a
// loopback address of its own) against one kube-apiserver + etcd holding
// S LoadBalancer Services, half Cluster and half Local. Points, by turns:
// --l2-announce=all (no election: every eligible node announces) and
// elected; each measured in steady state over a window (the API server's
// requests by verb and resource, its CPU, the agents' CPU, heartbeats),
// then, elected, one agent killed. Beside them, the cost of Cilium's way,
// one Lease per Service renewed by its holder every leaseRetryPeriod
// (scale_l2_lease.go), replayed against the same API server.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/lab/kubeenv"
)

// ScaleL2Config configures `netcube-lab bench scale-l2`.
type ScaleL2Config struct {
	Agents   []int // N, ascending
	Services int   // LoadBalancer Services, half Cluster, half Local
	Window   time.Duration
	// Interval: the agents' --l2-heartbeat-interval.
	Interval time.Duration
	// Rounds: each mode is measured this many times at each N, by turns.
	Rounds int
	// LeaseRenew: how often the Lease replay renews each Lease (Cilium's
	// l2announcements.leaseRetryPeriod, 2 s by default; 0: no replay).
	LeaseRenew time.Duration
	BinDir     string
	OutDir     string
	// Name: the report's files, <Name>.json, <Name>.md, plots/<Name>.svg
	// ("": scale-l2).
	Name string
	Log  io.Writer
}

// The points' modes: the agents' --l2-announce, and the Lease replay
// (with the agents of the "all" point running: its figures less theirs
// are the Leases' cost).
const (
	l2ModeAll     = "all"
	l2ModeElected = "elected"
	l2ModeLeases  = "all+leases"
)

// ScaleL2Result is one point.
type ScaleL2Result struct {
	Agents   int     `json:"agents"`
	Services int     `json:"services"`
	Mode     string  `json:"mode"`
	Round    int     `json:"round"`
	Error    string  `json:"error,omitempty"`
	WindowS  float64 `json:"window_seconds"`
	// Requests: the API server's requests per second over the window, by
	// "VERB resource[/subresource]" (apiserver_request_total deltas);
	// Writes: those of POST, PUT, PATCH and DELETE, summed.
	Requests     map[string]float64 `json:"requests_per_second"`
	WritesPerS   float64            `json:"writes_per_second"`
	ReadsPerS    float64            `json:"gets_lists_per_second"`
	WatchesOpen  float64            `json:"watches_open"`
	APICores     float64            `json:"apiserver_cores"`
	EtcdCores    float64            `json:"etcd_cores"`
	AgentCores   float64            `json:"agent_cores_mean"`
	AgentRSSMB   float64            `json:"agent_peak_rss_mb_mean"`
	StartAllS    float64            `json:"agents_all_ready_seconds"`
	HeartbeatsTx float64            `json:"heartbeats_sent_per_node_per_second,omitempty"`
	HeartbeatsRx float64            `json:"heartbeats_accepted_per_node_per_second,omitempty"`
	Refused      float64            `json:"heartbeats_refused_in_window,omitempty"`
	// AliveChanges: how many times an agent's alive set changed during
	// the window, over every agent (0: nobody flapped).
	AliveChanges int `json:"alive_changes_in_window"`
	// Announced: the addresses announced, over every agent (elected: one
	// announcer each, so Expected: those with an alive eligible node).
	Announced int `json:"announced,omitempty"`
	Expected  int `json:"expected,omitempty"`
	// Events: those written in the window, by "component reason" (who
	// writes the Events apiserver_request_total counts); Problems: the
	// agents' config problems at the window's end (each an Event).
	Events   map[string]int `json:"events_in_window,omitempty"`
	Problems int            `json:"agent_config_problems"`
	// The Lease replay: renewals done and failed, per second.
	LeaseRenewals float64 `json:"lease_renewals_per_second,omitempty"`
	LeaseErrors   int     `json:"lease_renewal_errors,omitempty"`
	ReplayCores   float64 `json:"replay_client_cores,omitempty"`
	Kill          *L2Kill `json:"kill,omitempty"`
}

// L2Kill is one agent killed (SIGKILL) in the elected mode.
type L2Kill struct {
	Node string `json:"node"`
	// Announced: what it announced; Moved: the takeovers the others
	// counted since (each address it held, moved once); Expected: the
	// addresses announced once it was gone.
	Announced int `json:"announced_before"`
	Moved     int `json:"moved"`
	Expected  int `json:"expected_after"`
	// From the kill: until the first and the last alive agent counted it
	// dead, until the last takeover, and until the bench saw every alive
	// agent agree (alive sets equal, each address announced once).
	FirstSawS float64 `json:"first_saw_dead_seconds"`
	AllSawS   float64 `json:"all_saw_dead_seconds"`
	LastTakeS float64 `json:"last_takeover_seconds"`
	AgreedS   float64 `json:"agreed_seen_by_bench_seconds"`
	Agreed    bool    `json:"agreed"`
}

// ScaleL2 runs the benchmark; the report is written after every point.
func ScaleL2(cfg ScaleL2Config) ([]ScaleL2Result, error) {
	if cfg.Rounds <= 0 {
		cfg.Rounds = 1
	}
	dir, err := os.MkdirTemp("", "netcube-bench-scale-l2-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	env, err := kubeenv.Start(kubeenv.Options{Dir: filepath.Join(dir, "cp"), ServiceCIDRs: "10.96.0.0/12"})
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	nodes := cfg.Agents[len(cfg.Agents)-1]
	fmt.Fprintf(cfg.Log, "== creating %d LoadBalancer Services (half Local), %d Nodes\n", cfg.Services, nodes)
	if err := createL2Cluster(cfg, env, nodes); err != nil {
		return nil, err
	}
	if err := kubeenv.InstallCRDs(env.Config); err != nil {
		return nil, err
	}
	header := newRunHeader(cfg.Rounds, cfg.Window, scaleL2Command(cfg))
	var results []ScaleL2Result
	var failed []error
	for _, n := range cfg.Agents {
		for round := range cfg.Rounds {
			modes := []string{l2ModeAll, l2ModeElected}
			if round%2 == 1 { // by turns: neither always first
				modes = []string{l2ModeElected, l2ModeAll}
			}
			for _, mode := range modes {
				fmt.Fprintf(cfg.Log, "== %d hollow agents, --l2-announce=%s (round %d)\n", n, mode, round+1)
				rs, err := l2Point(cfg, env, n, mode, round, filepath.Join(dir, fmt.Sprintf("n%d-%s-%d", n, mode, round)))
				if err != nil {
					rs[0].Error = err.Error()
					failed = append(failed, fmt.Errorf("%d agents, %s: %w", n, mode, err))
					fmt.Fprintf(cfg.Log, "   FAILED: %v\n", err)
				}
				for _, r := range rs {
					fmt.Fprintf(cfg.Log, "   %s: writes %.2f/s, gets+lists %.2f/s, API %.3f cores, agents %.4f cores each\n", r.Mode, r.WritesPerS, r.ReadsPerS, r.APICores, r.AgentCores)
				}
				results = append(results, rs...)
				if cfg.OutDir != "" {
					if err := writeScaleL2Report(cfg, header, results); err != nil {
						return results, err
					}
				}
			}
		}
	}
	return results, errors.Join(failed...)
}

func scaleL2Command(cfg ScaleL2Config) string {
	var ns []string
	for _, n := range cfg.Agents {
		ns = append(ns, strconv.Itoa(n))
	}
	name := ""
	if cfg.Name != "" && cfg.Name != "scale-l2" {
		name = " --name " + cfg.Name
	}
	return fmt.Sprintf("bin/netcube-lab bench scale-l2 --agents %s --services %d --window %s --heartbeat-interval %s --rounds %d --lease-renew %s%s",
		strings.Join(ns, ","), cfg.Services, cfg.Window, cfg.Interval, cfg.Rounds, cfg.LeaseRenew, name)
}

// heartbeatAddr is hollow agent i's heartbeat address, its Node's
// InternalIP: its metrics address's (metricsAddr), another port.
func heartbeatAddr(i int) string { return strings.TrimSuffix(metricsAddr(i), ":10249") }

// l2Local: Service i is externalTrafficPolicy Local (every other one).
func l2Local(i int) bool { return i%2 == 1 }

// l2EndpointNodes are the nodes of Service i's endpoints among nodes
// Nodes: two for Cluster, three spread over the nodes for Local (so a
// Local Service keeps an eligible node when one dies).
func l2EndpointNodes(i, nodes int) []int {
	if l2Local(i) {
		return []int{i % nodes, (i + nodes/3) % nodes, (i + 2*nodes/3) % nodes}
	}
	return []int{i % nodes, (i + 1) % nodes}
}

// l2Expected is how many addresses have an eligible node among the
// agents alive (0..n-1 but dead; -1: none dead): one announcer each
// when elected.
func l2Expected(services, nodes, n, dead int) int {
	count, alive := 0, n
	if dead >= 0 && dead < n {
		alive--
	}
	for i := range services {
		if !l2Local(i) {
			if alive > 0 {
				count++
			}
			continue
		}
		for _, k := range l2EndpointNodes(i, nodes) {
			if k < n && k != dead {
				count++
				break
			}
		}
	}
	return count
}

// l2IngressIP is Service i's LoadBalancer IP.
func l2IngressIP(i int) string {
	return netip.AddrFrom4([4]byte{172, 20, byte(i >> 8), byte(i)}).String()
}

// createL2Cluster makes the Nodes (each listing its agent's heartbeat
// address) through the API, and the Services with their status, slices
// and ClusterIP objects straight into etcd.
func createL2Cluster(cfg ScaleL2Config, env *kubeenv.Env, nodes int) error {
	ctx := context.Background()
	for i := range nodes {
		cidr := fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hollowNode(i)}, Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: heartbeatAddr(i)}}}}
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	var objs []kubeenv.StoredObject
	for i := range cfg.Services {
		svc := benchService(i)
		no := false
		svc.Spec.Type, svc.Spec.AllocateLoadBalancerNodePorts = corev1.ServiceTypeLoadBalancer, &no
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		if l2Local(i) {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = int32(30000 + i) // unique: 1,000 fit in the range
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: l2IngressIP(i)}}
		objs = append(objs,
			kubeenv.StoredObject{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: svc},
			kubeenv.StoredObject{Resource: networkingv1.Resource("ipaddresses"), Version: networkingv1.SchemeGroupVersion, Object: clusterIPAddress(svc)},
			kubeenv.StoredObject{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: l2Slice(i, nodes)})
	}
	if err := env.StoreDirect(ctx, objs); err != nil {
		return err
	}
	return waitListed(env.Client, cfg.Services)
}

// l2Slice is Service i's slice: a ready endpoint on each of its nodes.
func l2Slice(i, nodes int) *discoveryv1.EndpointSlice {
	s := benchSlice(i, 0, 0)
	ready := true
	for j, k := range l2EndpointNodes(i, nodes) {
		node := hollowNode(k)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{backendIP(i, j, 0).String()},
			NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

// l2Point starts n agents in mode, waits for the steady state, measures
// the window (and, in mode all, the Lease replay's; elected, a kill).
func l2Point(cfg ScaleL2Config, env *kubeenv.Env, n int, mode string, round int, dir string) ([]ScaleL2Result, error) {
	r := ScaleL2Result{Agents: n, Services: cfg.Services, Mode: mode, Round: round + 1}
	rs := []ScaleL2Result{r}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return rs, err
	}
	sc := ScaleConfig{BinDir: cfg.BinDir, Log: cfg.Log, AgentFlags: func(i int) []string {
		f := []string{"--l2-announce", mode, "--load-balancer-ips=false"} // the ingress IPs are the bench's, in no pool
		if mode == l2ModeElected {
			f = append(f, "--l2-heartbeat-addrs", heartbeatAddr(i), "--l2-heartbeat-interval", cfg.Interval.String())
		}
		return f
	}}
	agents, all, _, _, err := startAll(sc, env, dir, "start", "", n)
	defer func() {
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Go(a.stop)
		}
		wg.Wait()
	}()
	rs[0].StartAllS = all
	if err != nil {
		return rs, err
	}
	fmt.Fprintf(cfg.Log, "   all %d ready in %.1f s\n", n, all)
	if mode == l2ModeElected {
		want := l2Expected(cfg.Services, cfg.Agents[len(cfg.Agents)-1], n, -1)
		var got []agentL2
		ok := waitUntil(3*time.Minute, time.Second, func() bool {
			got = scrapeL2(agents)
			return l2Agree(got, n, want)
		})
		if !ok {
			// Measured all the same: what the heartbeats cost, and how
			// often the alive sets change, say why.
			disagree := fmt.Errorf("the %d agents did not agree within 3m: %s", n, l2Summary(got, want))
			fmt.Fprintf(cfg.Log, "   %v; measuring the window anyway\n", disagree)
			rs[0], err = l2Window(cfg, env, agents, rs[0], nil)
			return rs, errors.Join(disagree, err)
		}
	}
	time.Sleep(10 * time.Second) // the start's work (resyncs, Events) settles before the window
	if rs[0], err = l2Window(cfg, env, agents, rs[0], nil); err != nil {
		return rs, err
	}
	switch {
	case mode == l2ModeElected:
		rs[0].Kill, err = l2KillOne(cfg, agents, n)
		return rs, err
	case mode == l2ModeAll && cfg.LeaseRenew > 0:
		lr := ScaleL2Result{Agents: n, Services: cfg.Services, Mode: l2ModeLeases, Round: round + 1, StartAllS: all}
		replay, err := newLeaseReplay(env, cfg.Services, n, cfg.LeaseRenew)
		if err != nil {
			return append(rs, lr), err
		}
		fmt.Fprintf(cfg.Log, "   replaying %d Leases renewed every %s\n", cfg.Services, cfg.LeaseRenew)
		lr, err = l2Window(cfg, env, agents, lr, replay)
		return append(rs, lr), err
	}
	return rs, nil
}

// l2Window measures r's steady state over cfg.Window (with the Lease
// replay running through it, if given).
func l2Window(cfg ScaleL2Config, env *kubeenv.Env, agents []*hollowAgent, r ScaleL2Result, replay *leaseReplay) (ScaleL2Result, error) {
	n := len(agents)
	apiPID, etcdPID := env.APIServerPID(), env.EtcdPID()
	m0, err := scrapeAPIServer(env)
	if err != nil {
		return r, err
	}
	l0 := scrapeL2(agents)
	agentCPU0 := make([]float64, n)
	for i, a := range agents {
		agentCPU0[i], _ = procUsage(a.cmd.Process.Pid)
	}
	api0, _ := procUsage(apiPID)
	etcd0, _ := procUsage(etcdPID)
	self0, _ := procUsage(os.Getpid())
	start := time.Now()
	replayed := make(chan struct{})
	go func() {
		defer close(replayed)
		if replay != nil {
			replay.run(cfg.Window)
		}
	}()
	l2Progress(cfg.Log, cfg.Window)
	<-replayed
	window := time.Since(start).Seconds()
	api1, _ := procUsage(apiPID)
	etcd1, _ := procUsage(etcdPID)
	self1, _ := procUsage(os.Getpid())
	var cpu, rss float64
	for i, a := range agents {
		c, m := procUsage(a.cmd.Process.Pid)
		cpu += c - agentCPU0[i]
		rss += m
	}
	l1 := scrapeL2(agents)
	m1, err := scrapeAPIServer(env)
	if err != nil {
		return r, err
	}
	r.WindowS = window
	r.APICores, r.EtcdCores = (api1-api0)/window, (etcd1-etcd0)/window
	r.AgentCores, r.AgentRSSMB = cpu/float64(n)/window, rss/float64(n)
	r.Requests = map[string]float64{}
	before := requestCounts(m0)
	for k, v := range requestCounts(m1) {
		if d := v - before[k]; d > 0 {
			r.Requests[k] = d / window
			switch strings.Fields(k)[0] {
			case "POST", "PUT", "PATCH", "DELETE", "APPLY":
				r.WritesPerS += d / window
			case "GET", "LIST":
				r.ReadsPerS += d / window
			}
		}
	}
	r.WatchesOpen = m1.sum(watchesOpenRe)
	r.Events = eventsSince(env, start)
	for _, a := range agents {
		r.Problems += int(scrapeSum(a.metrics, "netcube_config_problems"))
	}
	var tx, rx, refused float64
	for i := range agents {
		tx += l1[i].sent - l0[i].sent
		rx += l1[i].accepted - l0[i].accepted
		refused += l1[i].refused - l0[i].refused
		r.AliveChanges += int(l1[i].changes - l0[i].changes)
		r.Announced += int(l1[i].announcing)
	}
	r.HeartbeatsTx, r.HeartbeatsRx, r.Refused = tx/float64(n)/window, rx/float64(n)/window, refused
	if r.Mode == l2ModeElected {
		r.Expected = l2Expected(cfg.Services, cfg.Agents[len(cfg.Agents)-1], n, -1)
	}
	if replay != nil {
		r.LeaseRenewals, r.LeaseErrors = float64(replay.done.Load())/window, int(replay.failed.Load())
		r.ReplayCores = (self1 - self0) / window
		if replay.firstErr != nil {
			return r, fmt.Errorf("lease replay: %d renewals failed, the first: %w", r.LeaseErrors, replay.firstErr)
		}
	}
	return r, nil
}

// l2Progress sleeps d, saying how much is left every 15 s.
func l2Progress(log io.Writer, d time.Duration) {
	end := time.Now().Add(d)
	for left := time.Until(end); left > 0; left = time.Until(end) {
		time.Sleep(min(left, 15*time.Second))
		if left = time.Until(end); left > time.Second {
			fmt.Fprintf(log, "   window: %s left\n", left.Round(time.Second))
		}
	}
}

// requestCounts sums apiserver_request_total by "VERB resource[/sub]".
func requestCounts(m apiServerMetrics) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(string(m), "\n") {
		if !strings.HasPrefix(l, "apiserver_request_total{") {
			continue
		}
		labels := map[string]string{}
		for _, g := range labelRe.FindAllStringSubmatch(l, -1) {
			labels[g[1]] = g[2]
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			continue
		}
		k := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			k += "/" + sub
		}
		out[k] += v
	}
	return out
}

var (
	labelRe       = regexp.MustCompile(`(\w+)="([^"]*)"`)
	watchesOpenRe = regexp.MustCompile(`^apiserver_longrunning_requests\{[^}]*verb="WATCH"[^}]*\} ([0-9.e+]+)$`)
)

// sortedKeys is m's keys, by value descending.
func sortedKeys(m map[string]float64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] || m[ks[i]] == m[ks[j]] && ks[i] < ks[j] })
	return ks
}

// eventsSince counts the Events last written at or after t, by their
// writer's component (or reporting controller) and reason.
func eventsSince(env *kubeenv.Env, t time.Time) map[string]int {
	l, err := env.Client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return map[string]int{"(list failed: " + err.Error() + ")": 1}
	}
	out := map[string]int{}
	since := t.Truncate(time.Second) // Event timestamps have seconds only
	for _, e := range l.Items {
		last := e.LastTimestamp.Time
		if e.EventTime.After(last) {
			last = e.EventTime.Time
		}
		if last.Before(since) {
			continue
		}
		who := e.Source.Component
		if who == "" {
			who = e.ReportingController
		}
		out[who+" "+e.Reason]++
	}
	return out
}
