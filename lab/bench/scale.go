package bench

// `netcube-lab bench scale`: N hollow agents (the real agent binary with
// --datapath=memory: the same sources, reconcilers and policy compiler,
// the maps in memory) against one real kube-apiserver + etcd, each with
// its own Node object. Per N: the cold start of all N at once, then a
// steady stream of endpoint changes (and policy edits) timed as
// Kubernetes defines network programming latency (every agent's
// netcube_network_programming_duration_seconds, merged), and what the
// API server pays: CPU, memory, and the watch bytes it sends per agent
// per change.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/lab/kubeenv"
)

// ScaleConfig configures `netcube-lab bench scale`.
type ScaleConfig struct {
	Agents    []int // N, ascending
	Services  int   // Services in the cluster
	Endpoints int   // endpoints per Service
	Pods      int   // pods, spread over the largest N's nodes
	Policies  int   // NetworkPolicies
	// Rate: endpoint changes per second for Duration; a policy is edited
	// every PolicyEvery; PodRate: pod status changes per second (a pod's
	// Ready condition flipped, as the kubelet reports it), which every
	// agent is sent because it watches every pod.
	Rate        float64
	PodRate     float64
	Duration    time.Duration
	PolicyEvery time.Duration
	// Variants: the ways the agents ask the API server, each measured at
	// every N (scaleVariants; nil: the default alone), in an order that
	// turns with N.
	Variants []string
	// ClusterPerN: each N gets a cluster of its own, with N Nodes and the
	// pods spread over them (else one cluster of the largest N's nodes):
	// with --pod-source=nodepods a node without an agent publishes no pods.
	ClusterPerN bool
	// ProfileDir, if set, gets a CPU profile of the API server over the
	// first ProfileSeconds of each start of the agents
	// (<N>-<variant>-<first|again>.pprof).
	ProfileDir     string
	ProfileSeconds int
	BinDir         string
	OutDir         string
	// AgentFlags, if set, gives hollow agent i more flags, after the
	// variant's (bench scale-l2: the L2 mode, heartbeat addresses).
	AgentFlags func(i int) []string
	// Name: the report's files, <Name>.json, <Name>.md and plots
	// (""": "scale").
	Name string
	Log  io.Writer
}

// scaleVariants are the ways an agent can ask the API server for its
// state: the flags that choose each, and what the report says of it.
var scaleVariants = map[string]struct {
	flags []string
	doc   string
}{
	"lists":      {nil, "the default, paged lists (2,000 objects a page) then a watch per resource, in protobuf"},
	"watch-list": {[]string{"--api-watch-list"}, "`--api-watch-list`: one watch per resource that begins with every object (the API server's WatchList streaming, KEP-3157), then carries the changes, in protobuf"},
	"json":       {[]string{"--api-content-type=json"}, "`--api-content-type=json`: paged lists then watches, in JSON"},
	"nodepods": {[]string{"--pod-source=nodepods"}, "`--pod-source=nodepods`: lists and watches as the default, but of the Pods only its own node's; " +
		"the other nodes' pods from the NodePods their agents write (so every node needs an agent: `--cluster-per-n`)"},
}

// ScaleVariants names the variants bench scale knows.
func ScaleVariants() []string { return slices.Sorted(maps.Keys(scaleVariants)) }

// ScaleResult is one N.
type ScaleResult struct {
	Commit  string `json:"commit"`
	Agents  int    `json:"agents"`
	Variant string `json:"variant"` // how the agents ask the API server (scaleVariants)
	// Error: why the point failed (its figures are partial, and the
	// report lists it apart).
	Error     string `json:"error,omitempty"`
	Services  int    `json:"services"`
	Endpoints int    `json:"endpoints_per_service"`
	Pods      int    `json:"pods"`
	Policies  int    `json:"policies"`
	// Cold start: every agent started at once; until the last is ready,
	// and the median agent.
	AllReadyS    float64 `json:"all_ready_seconds"`
	MedianReadyS float64 `json:"median_ready_seconds"`
	// ProblemsReported: config problems the agents reported after the
	// cold start, summed (the benchmark fails unless 0).
	ProblemsReported int `json:"problems_reported"`
	// The API server's CPU seconds over the cold start, per agent.
	APIServerCPUPerStartS float64 `json:"apiserver_cpu_per_agent_start_seconds"`
	// Every agent stopped and started again at once (a DaemonSet's
	// restart, against the state the first agents left): until the last
	// is ready, and the API server's CPU seconds per agent.
	RestartedReadyS         float64 `json:"agents_restarted_all_ready_seconds"`
	APIServerCPUPerRestartS float64 `json:"apiserver_cpu_per_agent_restart_seconds"`
	// The stream: endpoint changes written, policy edits, and the
	// latencies every agent observed (merged histograms, interpolated;
	// max is the upper bound of the highest bucket reached).
	Changes       int     `json:"endpoint_changes"`
	PolicyEdits   int     `json:"policy_edits"`
	Observed      int     `json:"latencies_observed"` // expected Changes x Agents
	LatencyP50MS  float64 `json:"programming_latency_p50_ms"`
	LatencyP99MS  float64 `json:"programming_latency_p99_ms"`
	LatencyMaxMS  float64 `json:"programming_latency_max_bucket_ms"`
	APIServerCPUS float64 `json:"apiserver_cpu_during_changes_seconds"`
	PodChanges    int     `json:"pod_changes"`
	// The bytes of watch events the API server sent during the stream
	// (apiserver_watch_events_sizes_sum) of each resource changed, over
	// agents x its changes.
	WatchBytesPerEndpointChange float64 `json:"watch_bytes_per_agent_per_endpoint_change"`
	WatchBytesPerPodChange      float64 `json:"watch_bytes_per_agent_per_pod_change"`
	WatchBytesPerPolicyEdit     float64 `json:"watch_bytes_per_agent_per_policy_edit"`
	// The policy cube's syncs over the stream (netcube_policy_sync_seconds,
	// every agent's: compiling what changed and writing the maps), each a
	// pod change or policy edit or several batched.
	PolicySyncs         int     `json:"policy_syncs"`
	PolicySyncP50MS     float64 `json:"policy_sync_p50_ms"`
	PolicySyncP99MS     float64 `json:"policy_sync_p99_ms"`
	APIServerPeakRSSMB  float64 `json:"apiserver_peak_rss_mb"` // sampled over this N
	AgentRSSMB          float64 `json:"agent_peak_rss_mb_mean"`
	AgentKBPerService   float64 `json:"agent_peak_rss_kb_per_service"`
	AgentCPUPerChangeMS float64 `json:"agent_cpu_per_change_ms"` // the stream's, per agent, per change of any kind
	// Restart: the API server stopped for RestartDown and started again
	// under the N agents. From the stop: until it is ready again, and
	// until every agent has programmed a change written once it was (each
	// relisted or resumed its watches); the new API server's CPU seconds
	// and peak RSS meanwhile, and the LIST requests it served.
	RestartDownS       float64 `json:"restart_down_seconds"`
	RestartReadyS      float64 `json:"restart_stop_to_ready_seconds"`
	RestartCurrentS    float64 `json:"restart_stop_to_all_current_seconds"`
	RestartAPICPUS     float64 `json:"restart_apiserver_cpu_seconds"`
	RestartAPIPeakRSS  float64 `json:"restart_apiserver_peak_rss_mb"`
	RestartListsServed int     `json:"restart_list_requests"`
	// WATCH requests, each a watch-list or a watch (the watch-lists of
	// the watch-list variant replace its LISTs).
	RestartWatchesServed int `json:"restart_watch_requests"`
}

// Scale runs the benchmark; each N's result is written as it is measured.
func Scale(cfg ScaleConfig) ([]ScaleResult, error) {
	dir, err := os.MkdirTemp("", "netcube-bench-scale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// cluster makes the control plane and the cluster for nodes Nodes.
	cluster := func(nodes int) (*kubeenv.Env, error) {
		env, err := kubeenv.Start(kubeenv.Options{Dir: filepath.Join(dir, fmt.Sprintf("cp-%d", nodes)), ServiceCIDRs: "10.96.0.0/12", Profiling: cfg.ProfileDir != ""})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(cfg.Log, "== creating %d Services x %d endpoints, %d Nodes, %d pods, %d NetworkPolicies\n",
			cfg.Services, cfg.Endpoints, nodes, cfg.Pods, cfg.Policies)
		if err := createScaleCluster(cfg, env, nodes); err != nil {
			env.Stop()
			return nil, err
		}
		if err := kubeenv.InstallCRDs(env.Config); err != nil {
			env.Stop()
			return nil, err
		}
		return env, nil
	}
	var env *kubeenv.Env
	defer func() {
		if env != nil {
			env.Stop()
		}
	}()
	if !cfg.ClusterPerN {
		if env, err = cluster(cfg.Agents[len(cfg.Agents)-1]); err != nil {
			return nil, err
		}
	}
	if len(cfg.Variants) == 0 {
		cfg.Variants = []string{"lists"}
	}
	for _, v := range cfg.Variants {
		if _, ok := scaleVariants[v]; !ok {
			return nil, fmt.Errorf("bench scale: variant %q: want one of %s", v, strings.Join(ScaleVariants(), ", "))
		}
	}
	var results []ScaleResult
	var failed []error
	edits := 0 // policy edits so far: each point's go on from them
	for k, n := range cfg.Agents {
		if cfg.ClusterPerN {
			if env != nil {
				env.Stop()
			}
			if env, err = cluster(n); err != nil {
				return results, err
			}
		}
		// The order turns with N, so that no variant always runs first.
		order := append(slices.Clone(cfg.Variants[k%len(cfg.Variants):]), cfg.Variants[:k%len(cfg.Variants)]...)
		for _, v := range order {
			fmt.Fprintf(cfg.Log, "== %d hollow agents, %s\n", n, v)
			// A point that fails is reported as failed, and the others
			// still run: each starts from a fresh API server.
			r, err := scalePoint(cfg, env, n, v, edits, filepath.Join(dir, fmt.Sprintf("n%d-%s", n, v)))
			edits += r.PolicyEdits
			if err != nil {
				r.Error = err.Error()
				failed = append(failed, fmt.Errorf("%d agents, %s: %w", n, v, err))
				fmt.Fprintf(cfg.Log, "   FAILED: %v\n", err)
			}
			fmt.Fprintf(cfg.Log, "   %+v\n", r)
			results = append(results, r)
			if cfg.OutDir != "" {
				if err := writeScaleReport(cfg, results); err != nil {
					return results, err
				}
			}
		}
	}
	return results, errors.Join(failed...)
}

func hollowNode(i int) string { return fmt.Sprintf("hollow-%04d", i) }

// createScaleCluster makes the cluster every N shares: the Services and
// slices and pods straight into etcd (kubeenv.StoreDirect), the Nodes and
// policies through the API.
func createScaleCluster(cfg ScaleConfig, env *kubeenv.Env, nodes int) error {
	if err := createServices(env, 0, cfg.Services, cfg.Endpoints, cfg.Log); err != nil {
		return err
	}
	ctx := context.Background()
	for i := range nodes {
		cidr := fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256)
		addr := fmt.Sprintf("172.16.%d.%d", i/250, 1+i%250) // where the other nodes route its pods (never sent to)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hollowNode(i)}, Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}}}
		if _, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	var pods []kubeenv.StoredObject
	for i := range cfg.Pods {
		node := i % nodes
		ip := fmt.Sprintf("10.%d.%d.%d", 128+node/256, node%256, 2+i/nodes%250)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: scalePodName(i), Namespace: benchNS, UID: "",
				Labels: map[string]string{"app": fmt.Sprintf("a%d", i%10)}},
			Spec: corev1.PodSpec{NodeName: hollowNode(node), Containers: []corev1.Container{{Name: "c", Image: "x",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
		}
		pods = append(pods, kubeenv.StoredObject{Resource: corev1.Resource("pods"), Version: corev1.SchemeGroupVersion, Object: p})
	}
	if err := env.StoreDirect(ctx, pods); err != nil {
		return err
	}
	for i := range cfg.Policies {
		if _, err := env.Client.NetworkingV1().NetworkPolicies(benchNS).Create(ctx, scalePolicy(i, 0), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("policy %d: %w", i, err)
		}
	}
	return nil
}

// flipPodReady sets pod i's Ready condition, True and False by turns (k),
// through the status subresource as the kubelet does.
func flipPodReady(ctx context.Context, env *kubeenv.Env, i, k int) error {
	status := []string{"True", "False"}[k%2]
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"lastTransitionTime":%q}]}}`, status, time.Now().UTC().Format(time.RFC3339))
	_, err := env.Client.CoreV1().Pods(benchNS).Patch(ctx, scalePodName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}

func scalePodName(i int) string { return fmt.Sprintf("pod-%05d", i) }

// scalePolicy i lets pods app=a(i+1) reach pods app=a(i) on a port that
// edit gen changes.
func scalePolicy(i, gen int) *networkingv1.NetworkPolicy {
	tcp, port := corev1.ProtocolTCP, intstr.FromInt32(int32(8080+gen%1000))
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pol-%04d", i), Namespace: benchNS},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("a%d", i%10)}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("a%d", (i+1)%10)}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}

// hollowAgent is one agent process of a point.
type hollowAgent struct {
	cmd       *exec.Cmd
	metrics   string
	readyFile string
	log       string
	ready     time.Duration
	exited    chan struct{} // closed once the process has exited and been reaped
}

// metricsAddr is hollow agent i's /metrics: a loopback address of its
// own (all of 127/8 is loopback), so that no two agents, nor the agents'
// own connections from 127.0.0.1's ephemeral ports, take one port.
func metricsAddr(i int) string { return fmt.Sprintf("127.1.%d.%d:10249", i/250, 1+i%250) }

func startHollow(cfg ScaleConfig, env *kubeenv.Env, dir, variant string, i int) (*hollowAgent, error) {
	a := &hollowAgent{metrics: metricsAddr(i), readyFile: filepath.Join(dir, fmt.Sprintf("%d.ready", i)),
		log: filepath.Join(dir, fmt.Sprintf("%d.log", i)), exited: make(chan struct{})}
	logf, err := os.Create(a.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	a.cmd = exec.Command(filepath.Join(cfg.BinDir, "netcube-agent"), "--datapath", "memory", "--kubeconfig", env.Kubeconfig,
		"--node-name", hollowNode(i), "--socket-lb=false", "--node-ifaces", "none", "--cni-socket=", "--api-socket=", "--hubble-socket=",
		"--ready-file", a.readyFile, "--metrics-bind-address", a.metrics, "--healthz-bind-address", "")
	a.cmd.Args = append(a.cmd.Args, scaleVariants[variant].flags...)
	if cfg.AgentFlags != nil {
		a.cmd.Args = append(a.cmd.Args, cfg.AgentFlags(i)...)
	}
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	// The control plane has a machine of its own in a cluster; here it
	// shares two CPUs with every agent. Niced, the agents take what the
	// API server and etcd leave, rather than a hundredth share each
	// starving them (at 100 agents the API server timed out TLS
	// handshakes and lists, and every agent retried).
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, a.cmd.Process.Pid, agentNice); err != nil {
		return a, fmt.Errorf("nice hollow agent %d: %w", i, err)
	}
	return a, nil
}

// programmingLatency is the agents' network programming latency histogram.
const programmingLatency = "netcube_network_programming_duration_seconds"

// agentNice is the hollow agents' nice value.
const agentNice = 19

func (a *hollowAgent) hasExited() bool { return closed(a.exited) }

func (a *hollowAgent) stop() { stopProcess(a.cmd.Process, a.exited, syscall.SIGTERM, 10*time.Second) }

// startAll starts n hollow agents at once and waits until every one is
// ready: the agents, the seconds until the last and the median one were
// ready, and the API server's CPU seconds meanwhile per agent (phase: the
// start's name, its directory's under dir).
func startAll(cfg ScaleConfig, env *kubeenv.Env, dir, phase, variant string, n int) (agents []*hollowAgent, all, median, apiCPUPerStart float64, err error) {
	if dir = filepath.Join(dir, phase); os.MkdirAll(dir, 0o755) != nil {
		return nil, 0, 0, 0, fmt.Errorf("mkdir %s", dir)
	}
	if cfg.ProfileDir != "" {
		done := profileAPIServer(env, filepath.Join(cfg.ProfileDir, fmt.Sprintf("%d-%s-%s.pprof", n, variant, phase)), cfg.ProfileSeconds, cfg.Log)
		defer func() { <-done }()
	}
	apiPID := env.APIServerPID()
	apiCPU0, _ := procUsage(apiPID)
	start := time.Now()
	agents = make([]*hollowAgent, 0, n)
	for i := range n {
		a, err := startHollow(cfg, env, dir, variant, i)
		if a != nil {
			agents = append(agents, a)
		}
		if err != nil {
			return agents, 0, 0, 0, err
		}
	}
	waiting := n
	lastShown := time.Now()
	for waiting > 0 {
		waiting = 0
		for _, a := range agents {
			if a.ready != 0 {
				continue
			}
			if _, err := os.Stat(a.readyFile); err == nil {
				a.ready = time.Since(start)
				continue
			}
			if a.hasExited() {
				b, _ := os.ReadFile(a.log)
				return agents, 0, 0, 0, fmt.Errorf("hollow agent %s exited before ready:\n%s", a.readyFile, tail(b, 40))
			}
			waiting++
		}
		if time.Since(start) > 15*time.Minute {
			return agents, 0, 0, 0, fmt.Errorf("%d of %d hollow agents not ready after 15m", waiting, n)
		}
		if time.Since(lastShown) > 5*time.Second {
			fmt.Fprintf(cfg.Log, "   %d/%d ready after %s\n", n-waiting, n, time.Since(start).Round(time.Second))
			lastShown = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	var readies []float64
	for _, a := range agents {
		readies = append(readies, a.ready.Seconds())
	}
	all = time.Since(start).Seconds()
	apiCPU1, _ := procUsage(apiPID)
	return agents, all, medianOf(readies), (apiCPU1 - apiCPU0) / float64(n), nil
}

// profileAPIServer writes a CPU profile of the API server over the next
// seconds to file; the channel is closed once it is written (or failed,
// which is logged).
func profileAPIServer(env *kubeenv.Env, file string, seconds int, log io.Writer) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).
			Timeout(time.Duration(seconds+30) * time.Second).DoRaw(context.Background())
		if err == nil {
			err = os.MkdirAll(filepath.Dir(file), 0o755)
		}
		if err == nil {
			err = os.WriteFile(file, b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(log, "   API server profile %s: %v\n", file, err)
		}
	}()
	return done
}

// scalePoint measures n agents asking as variant; its policy edits are
// numbered on from firstEdit, so that none repeats an earlier point's
// (an update that changes nothing sends no watch event).
func scalePoint(cfg ScaleConfig, env *kubeenv.Env, n int, variant string, firstEdit int, dir string) (ScaleResult, error) {
	r := ScaleResult{Commit: Commit(), Agents: n, Variant: variant, Services: cfg.Services, Endpoints: cfg.Endpoints, Pods: cfg.Pods, Policies: cfg.Policies}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	// A fresh API server: no point inherits the heap another's agents
	// grew (its peak RSS is this point's).
	if err := env.RestartAPIServer(func() error { return nil }); err != nil {
		return r, fmt.Errorf("fresh API server: %w", err)
	}
	apiPID := env.APIServerPID()
	stopSampling := sampleRSS(apiPID, &r.APIServerPeakRSSMB)
	defer stopSampling()

	// Cold start: all N at once; then every agent stopped and started
	// again, as a DaemonSet's restart does, against the state the first
	// ones left (with --pod-source=nodepods: every NodePods written).
	var agents []*hollowAgent
	stopAll := func() {
		var wg sync.WaitGroup
		for _, a := range agents {
			if a != nil {
				wg.Go(a.stop)
			}
		}
		wg.Wait()
	}
	defer func() { stopAll() }()
	var err error
	if agents, r.AllReadyS, r.MedianReadyS, r.APIServerCPUPerStartS, err = startAll(cfg, env, dir, "first", variant, n); err != nil {
		return r, err
	}
	fmt.Fprintf(cfg.Log, "   all %d ready in %.1f s; restarting them\n", n, r.AllReadyS)
	time.Sleep(2 * time.Second) // the first agents' post-start work settles
	stopAll()
	if agents, r.RestartedReadyS, _, r.APIServerCPUPerRestartS, err = startAll(cfg, env, dir, "again", variant, n); err != nil {
		return r, err
	}
	fmt.Fprintf(cfg.Log, "   all %d ready again in %.1f s\n", n, r.RestartedReadyS)
	// A problem an agent reports is an Event it writes: the cluster is
	// built to have none, so that the API server's figures are the
	// agents' lists and watches alone.
	for _, a := range agents {
		r.ProblemsReported += int(scrapeSum(a.metrics, "netcube_config_problems"))
	}
	if r.ProblemsReported > 0 {
		return r, fmt.Errorf("the agents report %d problems with the benchmark's objects (each an Event): fix the cluster", r.ProblemsReported)
	}
	time.Sleep(2 * time.Second) // the agents' post-start work (Events, LB IPs) settles

	// The stream.
	metric := programmingLatency
	before := make([]histogram, n)
	const policyMetric = "netcube_policy_sync_seconds"
	policyBefore := make([]histogram, n)
	agentCPU0 := make([]float64, n)
	for i, a := range agents {
		before[i] = scrapeHistogram(a.metrics, metric)
		policyBefore[i] = scrapeHistogram(a.metrics, policyMetric)
		agentCPU0[i], _ = procUsage(a.cmd.Process.Pid)
	}
	m0, err := scrapeAPIServer(env)
	if err != nil {
		return r, err
	}
	apiCPU2, _ := procUsage(apiPID)
	ctx := context.Background()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	streamStart := time.Now()
	nextPolicy := streamStart.Add(cfg.PolicyEvery)
	nextPod, podInterval := streamStart, time.Duration(0)
	if cfg.PodRate > 0 {
		podInterval = time.Duration(float64(time.Second) / cfg.PodRate)
	}
	for k := 0; time.Since(streamStart) < cfg.Duration; k++ {
		due := streamStart.Add(time.Duration(k) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		i := rand.IntN(cfg.Services)
		s := benchSlice(i, cfg.Endpoints, 1+k)
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)}
		if _, err := env.Client.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return r, fmt.Errorf("endpoint change %d: %w", k, err)
		}
		r.Changes++
		if cfg.Policies > 0 && cfg.PolicyEvery > 0 && time.Now().After(nextPolicy) {
			e := firstEdit + r.PolicyEdits
			p := scalePolicy(e%cfg.Policies, e+1)
			if _, err := env.Client.NetworkingV1().NetworkPolicies(benchNS).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				return r, fmt.Errorf("policy edit %d: %w", r.PolicyEdits, err)
			}
			r.PolicyEdits++
			nextPolicy = nextPolicy.Add(cfg.PolicyEvery)
		}
		for ; podInterval > 0 && !time.Now().Before(nextPod); nextPod = nextPod.Add(podInterval) {
			if err := flipPodReady(ctx, env, rand.IntN(cfg.Pods), r.PodChanges); err != nil {
				return r, fmt.Errorf("pod change %d: %w", r.PodChanges, err)
			}
			r.PodChanges++
		}
	}
	// Every agent programs every change: wait for the counts.
	want := float64(r.Changes * n)
	merged := func() (b, a histogram) {
		b, a = histogram{}, histogram{}
		for i, ag := range agents {
			for le, v := range before[i] {
				b[le] += v
			}
			for le, v := range scrapeHistogram(ag.metrics, metric) {
				a[le] += v
			}
		}
		return b, a
	}
	var hb, ha histogram
	waitUntil(2*time.Minute, 200*time.Millisecond, func() bool {
		hb, ha = merged()
		return ha[1e9]-hb[1e9] >= want
	})
	r.Observed = int(ha[1e9] - hb[1e9])
	apiCPU3, _ := procUsage(apiPID)
	r.APIServerCPUS = apiCPU3 - apiCPU2
	m1, err := scrapeAPIServer(env)
	if err != nil {
		return r, err
	}
	perAgent := func(resource string, changes int) float64 {
		re := watchSizeOf(resource)
		return (m1.sum(re) - m0.sum(re)) / float64(n*max(1, changes))
	}
	r.WatchBytesPerEndpointChange = perAgent("endpointslices", r.Changes)
	// A pod change's events: its Pod object's, and (--pod-source=nodepods)
	// its node's NodePods' if the change were written there.
	r.WatchBytesPerPodChange = perAgent("pods", r.PodChanges) + perAgent("nodepods", r.PodChanges)
	r.WatchBytesPerPolicyEdit = perAgent("networkpolicies", r.PolicyEdits)
	for _, c := range []struct {
		what    string
		changes int
		bytes   float64
	}{{"endpoint changes", r.Changes, r.WatchBytesPerEndpointChange}, {"pod changes", r.PodChanges, r.WatchBytesPerPodChange}, {"policy edits", r.PolicyEdits, r.WatchBytesPerPolicyEdit}} {
		if c.changes > 0 && c.bytes == 0 {
			return r, fmt.Errorf("the %d %s sent the agents no watch event: each must change its object", c.changes, c.what)
		}
	}
	pb, pa := histogram{}, histogram{}
	for i, a := range agents {
		for le, v := range policyBefore[i] {
			pb[le] += v
		}
		for le, v := range scrapeHistogram(a.metrics, policyMetric) {
			pa[le] += v
		}
	}
	r.PolicySyncs = int(pa[1e9] - pb[1e9])
	r.PolicySyncP50MS, r.PolicySyncP99MS = histQuantile(pb, pa, 0.5)*1e3, histQuantile(pb, pa, 0.99)*1e3
	r.LatencyP50MS, r.LatencyP99MS = histQuantile(hb, ha, 0.5)*1e3, histQuantile(hb, ha, 0.99)*1e3
	r.LatencyMaxMS = maxBucket(hb, ha) * 1e3
	var rss, cpu float64
	for i, a := range agents {
		c, m := procUsage(a.cmd.Process.Pid)
		rss += m
		cpu += c - agentCPU0[i]
	}
	r.AgentRSSMB = rss / float64(n)
	r.AgentKBPerService = r.AgentRSSMB * 1024 / float64(cfg.Services)
	r.AgentCPUPerChangeMS = cpu / float64(n) / float64(max(1, r.Changes+r.PodChanges+r.PolicyEdits)) * 1e3
	if r.Observed < int(want) {
		return r, fmt.Errorf("%d agents observed %d of %d programming latencies within 2m of the last change", n, r.Observed, int(want))
	}
	return r, restartStorm(cfg, env, agents, &r)
}

// restartDown is how long the API server stays down in the restart: long
// enough for every agent's watches to fail and back off.
const restartDown = 3 * time.Second

// restartStorm restarts the API server under the agents and measures
// until every agent is current again: a change written once the server
// is back, programmed by every agent.
func restartStorm(cfg ScaleConfig, env *kubeenv.Env, agents []*hollowAgent, r *ScaleResult) error {
	metric := programmingLatency
	counts := func() []float64 {
		out := make([]float64, len(agents))
		for i, a := range agents {
			out[i] = scrapeHistogram(a.metrics, metric)[1e9]
		}
		return out
	}
	before := counts()
	fmt.Fprintf(cfg.Log, "   restarting the API server under %d agents (down %s)\n", len(agents), restartDown)
	stopped := time.Now()
	if err := env.RestartAPIServer(func() error { time.Sleep(restartDown); return nil }); err != nil {
		return err
	}
	r.RestartDownS, r.RestartReadyS = restartDown.Seconds(), time.Since(stopped).Seconds()
	pid := env.APIServerPID()
	stopSampling := sampleRSS(pid, &r.RestartAPIPeakRSS)
	defer stopSampling()
	s := benchSlice(rand.IntN(cfg.Services), cfg.Endpoints, 1_000_000)
	s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)}
	if _, err := env.Client.DiscoveryV1().EndpointSlices(benchNS).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("the change after the restart: %w", err)
	}
	current := waitUntil(5*time.Minute, 50*time.Millisecond, func() bool {
		now := counts()
		for i := range agents {
			if now[i] <= before[i] {
				return false
			}
		}
		return true
	})
	r.RestartCurrentS = time.Since(stopped).Seconds()
	r.RestartAPICPUS, _ = procUsage(pid)
	m, err := scrapeAPIServer(env)
	if err != nil {
		return err
	}
	r.RestartListsServed, r.RestartWatchesServed = int(m.sum(listRe)), int(m.sum(watchRe))
	if !current {
		return fmt.Errorf("not every agent programmed the change written after the API server's restart within 5m")
	}
	return nil
}

// maxBucket is the upper bound of the lowest bucket holding every
// observation made between the two scrapes (1e9: only +Inf does).
func maxBucket(before, after histogram) float64 {
	total := after[1e9] - before[1e9]
	var bounds []float64
	for le := range after {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	for _, le := range bounds {
		if after[le]-before[le] >= total {
			return le
		}
	}
	return 1e9
}

// scrapeSum is the sum of every sample of a metric on an agent's /metrics.
func scrapeSum(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// apiServerMetrics is one scrape of the API server's /metrics.
type apiServerMetrics string

func scrapeAPIServer(env *kubeenv.Env) (apiServerMetrics, error) {
	b, err := env.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		return "", fmt.Errorf("the API server's /metrics: %w", err)
	}
	return apiServerMetrics(b), nil
}

// sum adds the values of every sample re matches (its group 1).
func (m apiServerMetrics) sum(re *regexp.Regexp) float64 {
	n := 0.0
	for _, l := range strings.Split(string(m), "\n") {
		if g := re.FindStringSubmatch(l); g != nil {
			v, _ := strconv.ParseFloat(g[1], 64)
			n += v
		}
	}
	return n
}

// watchSizeOf matches the bytes of the watch events the API server has
// sent of resource, to every watcher.
func watchSizeOf(resource string) *regexp.Regexp {
	return regexp.MustCompile(`^apiserver_watch_events_sizes_sum\{[^}]*resource="` + regexp.QuoteMeta(resource) + `"[^}]*\} ([0-9.e+]+)$`)
}

var (
	// listRe: the LIST requests it has served since it started, per
	// resource and code.
	listRe = regexp.MustCompile(`^apiserver_request_total\{[^}]*verb="LIST"[^}]*\} ([0-9.e+]+)$`)
	// watchRe: the WATCH requests, likewise.
	watchRe = regexp.MustCompile(`^apiserver_request_total\{[^}]*verb="WATCH"[^}]*\} ([0-9.e+]+)$`)
)

// sampleRSS records pid's largest VmRSS in MB into peak until stopped.
func sampleRSS(pid int, peak *float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				if m := vmRSS.FindSubmatch(b); m != nil {
					kb, _ := strconv.ParseFloat(string(m[1]), 64)
					*peak = max(*peak, kb/1024)
				}
			}
			select {
			case <-done:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

var vmRSS = regexp.MustCompile(`VmRSS:\s+(\d+) kB`)

// tail is the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
