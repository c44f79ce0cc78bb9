package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// SyncConfig configures `netcube-lab bench sync`.
type SyncConfig struct {
	Services  []int // cluster sizes, ascending (Services are added between sizes)
	Endpoints []int // endpoints per Service
	Changes   int   // endpoint changes timed per size
	// Starts: agent starts per point on empty maps, and restarts on full
	// ones; the full-sync figures are their medians (0: 3).
	Starts int
	// GzipLists: before each first start, start the agent once more with
	// --api-compression (gzip-compressed lists), to report what
	// compression costs; the two interleaved.
	GzipLists bool
	// PageSizes: before each first start, start the agent once more with
	// each of these --api-list-page-size values, to report what the page
	// size costs the API server, the agent's time and its memory; all
	// interleaved.
	PageSizes []int
	BinDir    string
	OutDir    string
	Merge     bool // keep the points already in OutDir's report
	Log       io.Writer
}

// SyncResult is one (Services, endpoints) point.
type SyncResult struct {
	Commit string `json:"commit"` // the netcube commit measured (Commit; UnknownCommit: from before reports named theirs)
	// CommitNote says why Commit is unknown, when it is.
	CommitNote string `json:"commit_note,omitempty"`
	Services   int    `json:"services"`
	Endpoints  int    `json:"endpoints_per_service"`
	// API write (client returns) -> new backend visible in the maps.
	WriteToMapP50 float64 `json:"write_to_map_p50_ms"`
	WriteToMapP99 float64 `json:"write_to_map_p99_ms"`
	// Change arrives at the agent -> its map writes are done (agent metric).
	EventToMapP50 float64 `json:"event_to_map_p50_ms"`
	EventToMapP99 float64 `json:"event_to_map_p99_ms"`
	// Full sync, on a first start (empty maps) and on a restart (maps
	// pinned, nothing to change): the agent's time spent applying Services,
	// and the wall time from the first event to all applied (which includes
	// waiting for the API server's list); and agent start -> ready.
	FullSyncFirst              float64 `json:"full_sync_apply_first_ms"`
	FullSyncRestart            float64 `json:"full_sync_apply_restart_ms"`
	FirstEventToAppliedFirst   float64 `json:"first_event_to_applied_first_ms"`
	FirstEventToAppliedRestart float64 `json:"first_event_to_applied_restart_ms"`
	StartToReady               float64 `json:"start_to_ready_ms"`
	RestartToReady             float64 `json:"restart_to_ready_ms"`
	RestartMapUpdates          int     `json:"restart_map_updates"`
	CPUSeconds                 float64 `json:"agent_cpu_seconds"`
	PeakRSSMB                  float64 `json:"agent_peak_rss_mb"`
	// Split is where a first start's full sync goes (medians of the starts).
	Split SyncSplit `json:"first_sync_split"`
	// APIServerCPUFirst: the API server's CPU seconds from a first start
	// to ready (median of the starts): what one agent's initial lists cost it.
	APIServerCPUFirst float64 `json:"apiserver_cpu_first_start_seconds"`
	// Gzip: the same first starts with gzip-compressed lists
	// (--api-compression), interleaved with them (GzipLists; nil: not run).
	Gzip *SyncGzip `json:"gzip_lists,omitempty"`
	// PeakRSSAtReadyMB: the agent's peak RSS as of ready, on a first start
	// (median of the starts): the initial lists and sync, no changes yet.
	PeakRSSAtReadyMB float64 `json:"agent_peak_rss_at_ready_mb,omitempty"`
	// PageSizes: the same first starts with other list page sizes
	// (--api-list-page-size), interleaved with them (SyncConfig.PageSizes).
	PageSizes []SyncPageSize `json:"list_page_sizes,omitempty"`
}

// SyncPageSize is first starts listing in pages of PageSize objects
// (medians of the starts).
type SyncPageSize struct {
	PageSize         int     `json:"page_size"`
	StartToReady     float64 `json:"start_to_ready_ms"`
	ListMS           float64 `json:"list_ms"`
	DecodeMS         float64 `json:"decode_ms"`
	APIServerCPU     float64 `json:"apiserver_cpu_seconds"`
	PeakRSSAtReadyMB float64 `json:"agent_peak_rss_at_ready_mb"`
}

// SyncGzip is first starts whose lists the API server compressed
// (medians of the starts).
type SyncGzip struct {
	StartToReady float64 `json:"start_to_ready_ms"`
	ListMS       float64 `json:"list_ms"`
	DecodeMS     float64 `json:"decode_ms"`
	APIServerCPU float64 `json:"apiserver_cpu_seconds"`
}

// SyncSplit is a full sync's time by phase, as the agent logs it: the
// initial lists of Services and EndpointSlices (API server requests and
// reading the pages, decoding them, converting to the model and handing
// that on; summed over both resources, which are listed at the same time),
// then the apply (full sync apply) as computing frontends and backends and
// writing the maps.
type SyncSplit struct {
	ListMS     float64 `json:"list_ms"`
	DecodeMS   float64 `json:"decode_ms"`
	ConvertMS  float64 `json:"convert_ms"`
	ComputeMS  float64 `json:"compute_ms"`
	MapWriteMS float64 `json:"map_write_ms"`
}

const benchNS = "default"

// Sync runs the control-plane benchmark against a real API server.
func Sync(cfg SyncConfig) ([]SyncResult, error) {
	var results []SyncResult
	for _, eps := range cfg.Endpoints {
		dir, err := os.MkdirTemp("", "netcube-bench-sync-")
		if err != nil {
			return nil, err
		}
		env, err := kubeenv.Start(kubeenv.Options{Dir: dir, ServiceCIDRs: "10.96.0.0/12"})
		if err != nil {
			return nil, err
		}
		created := 0
		for _, n := range cfg.Services {
			fmt.Fprintf(cfg.Log, "== %d Services x %d endpoints: creating %d Services and EndpointSlices\n", n, eps, n-created)
			start := time.Now()
			if err := createServices(env, created, n, eps, cfg.Log); err != nil {
				env.Stop()
				return nil, err
			}
			fmt.Fprintf(cfg.Log, "   created in %s\n", time.Since(start).Round(time.Second))
			created = n
			cp, err := controlPlaneOf(env)
			if err != nil {
				env.Stop()
				return nil, err
			}
			cp.settle(cfg.Log)
			r, err := syncPoint(cfg, env, n, eps)
			if err != nil {
				env.Stop()
				return nil, err
			}
			fmt.Fprintf(cfg.Log, "   %+v\n", r)
			results = append(results, r)
			if cfg.OutDir != "" { // after every point: a long run never loses what it measured
				if err := writeSyncReport(cfg, results); err != nil {
					env.Stop()
					return nil, err
				}
			}
		}
		env.Stop()
		os.RemoveAll(dir)
	}
	return results, nil
}

func serviceName(i int) string { return fmt.Sprintf("s%06d", i) }

// createServices stores Services [from, to) with eps endpoints each, and
// the IPAddress objects the API server's ClusterIP allocator keeps for
// them, straight into etcd (kubeenv.StoreDirect says why); the timed
// endpoint changes later go through the API.
func createServices(env *kubeenv.Env, from, to, eps int, log io.Writer) error {
	const chunk = 5000
	for lo := from; lo < to; lo += chunk {
		var objs []kubeenv.StoredObject
		for i := lo; i < min(lo+chunk, to); i++ {
			svc := benchService(i)
			objs = append(objs,
				kubeenv.StoredObject{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: svc},
				kubeenv.StoredObject{Resource: networkingv1.Resource("ipaddresses"), Version: networkingv1.SchemeGroupVersion, Object: clusterIPAddress(svc)},
				kubeenv.StoredObject{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: benchSlice(i, eps, 0)})
		}
		if err := env.StoreDirect(context.Background(), objs); err != nil {
			return err
		}
		fmt.Fprintf(log, "   %d/%d\n", min(lo+chunk, to)-from, to-from)
	}
	return waitListed(env.Client, to)
}

// waitListed waits until the API server lists n Services in the namespace
// (its watch cache has caught up with the direct writes).
func waitListed(c kubernetes.Interface, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		l, err := c.CoreV1().Services(benchNS).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
		if err == nil && len(l.Items) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			got := 0
			if l != nil {
				got = len(l.Items)
			}
			return fmt.Errorf("API server lists %d of %d Services after 2m (%v)", got, n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// clusterIPAddress is the IPAddress object the allocator would have made.
func clusterIPAddress(svc *corev1.Service) *networkingv1.IPAddress {
	return &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Spec.ClusterIP, Labels: map[string]string{
			networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol),
			networkingv1.LabelManagedBy:       "ipallocator.k8s.io",
		}},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Resource: "services", Namespace: svc.Namespace, Name: svc.Name}},
	}
}

// benchService i has ClusterIP 10.96.0.0/12 + 256 + i (past the API
// server's own 10.96.0.1), with every field the API server would default,
// as it is stored without passing through the API.
func benchService(i int) *corev1.Service {
	n := i + 256
	ip := netip.AddrFrom4([4]byte{10, byte(96 + n>>16), byte(n >> 8), byte(n)}).String()
	single, cluster := corev1.IPFamilyPolicySingleStack, corev1.ServiceInternalTrafficPolicyCluster
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(i), Namespace: benchNS},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: &single,
			SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: &cluster,
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
			}},
	}
}

// benchSlice gives Service i eps endpoints; gen changes the first one.
func benchSlice(i, eps, gen int) *discoveryv1.EndpointSlice {
	port, name := int32(8080), "http"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(i), Namespace: benchNS,
			Labels: map[string]string{discoveryv1.LabelServiceName: serviceName(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
	for j := range eps {
		g := 0
		if j == 0 {
			g = gen
		}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{backendIP(i, j, g).String()}})
	}
	return s
}

// backendIP is endpoint j of Service i in generation g: unique per (i, j, g).
func backendIP(i, j, g int) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(20 + g%100), byte(j*16 + i>>16), byte(i >> 8), byte(i)}) // 20-119.x.x.x: never loopback or link-local
}

// agentProc is a netcube-agent run by the benchmark.
type agentProc struct {
	cmd     *exec.Cmd
	log     string
	metrics string
	started time.Time
	ready   time.Duration
	apiCPU  float64       // the API server's CPU seconds from start to ready
	exited  chan struct{} // closed when the process has exited (and been reaped)
	waitErr error
	// cpuProfiled is closed once the CPU profile of the start is saved
	// (NETCUBE_BENCH_PROFILES).
	cpuProfiled chan struct{}
}

// startBenchAgent starts an agent on the pinned maps at pins; run names its
// log (<pins>-<run>.log in the control plane's directory, which the run
// removes when it ends).
func startBenchAgent(cfg SyncConfig, env *kubeenv.Env, pins, run string, extra ...string) (*agentProc, error) {
	state := filepath.Join(env.Dir, filepath.Base(pins)+"-"+run)
	metrics, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	a := &agentProc{log: state + ".log", metrics: metrics, exited: make(chan struct{})}
	logf, err := os.Create(a.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	readyFile := state + ".ready"
	_ = os.Remove(readyFile)
	a.cmd = exec.Command(filepath.Join(cfg.BinDir, "netcube-agent"), "--kubeconfig", env.Kubeconfig,
		"--bpf-root", pins, "--socket-lb=false", "--pod-iface-prefix", "none-", "--node-ifaces", "none", "--cni-socket=", "--api-socket=", "--hubble-socket=", "--ready-file", readyFile,
		"--metrics-bind-address", a.metrics, "--healthz-bind-address", "", "--profiling",
		"--lb-service-map-size", "2500000", "--lb-backend-map-size", "1200000", "--lb-revnat-map-size", "200000")
	a.cmd.Args = append(a.cmd.Args, extra...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	apiCPU := func() float64 { cpu, _ := procUsage(env.APIServerPID()); return cpu }
	apiBefore := apiCPU()
	a.started = time.Now()
	if err := a.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { a.waitErr = a.cmd.Wait(); close(a.exited) }()
	if dir := os.Getenv("NETCUBE_BENCH_PROFILES"); dir != "" && run == "first" {
		a.cpuProfiled = make(chan struct{})
		go func() {
			defer close(a.cpuProfiled)
			a.saveCPUProfile(filepath.Join(dir, filepath.Base(pins)+"-cpu.pprof"))
		}()
	}
	for {
		if _, err := os.Stat(readyFile); err == nil {
			a.ready = time.Since(a.started)
			a.apiCPU = apiCPU() - apiBefore
			return a, nil
		}
		if a.hasExited() || time.Since(a.started) > 10*time.Minute {
			a.stop()
			b, _ := os.ReadFile(a.log)
			return nil, fmt.Errorf("agent did not become ready:\n%s", b)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// initialSync reads the agent's initial sync from its log.
func (a *agentProc) initialSync() (agentSync, error) {
	b, err := os.ReadFile(a.log)
	if err != nil {
		return agentSync{}, err
	}
	s, err := parseAgentSync(b)
	if err != nil {
		return s, fmt.Errorf("%s: %w", a.log, err)
	}
	return s, nil
}

// usage returns the agent's CPU seconds and peak RSS (MiB) so far.
func (a *agentProc) usage() (cpu, rssMB float64) { return procUsage(a.cmd.Process.Pid) }

func (a *agentProc) saveHeapProfile(path string) {
	resp, err := http.Get("http://" + a.metrics + "/debug/pprof/heap")
	if err != nil {
		fmt.Fprintln(os.Stderr, "heap profile:", err)
		return
	}
	defer resp.Body.Close()
	if f, err := os.Create(path); err == nil {
		_, _ = io.Copy(f, resp.Body)
		f.Close()
	}
}

// saveCPUProfile records the agent's first 10 s of CPU (its start and
// initial sync), once its metrics address answers.
func (a *agentProc) saveCPUProfile(path string) {
	for !a.hasExited() {
		resp, err := http.Get("http://" + a.metrics + "/debug/pprof/profile?seconds=10")
		if err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		defer resp.Body.Close()
		if f, err := os.Create(path); err == nil {
			_, _ = io.Copy(f, resp.Body)
			f.Close()
		}
		return
	}
}

func (a *agentProc) hasExited() bool { return closed(a.exited) }

func (a *agentProc) stop() {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	<-a.exited
}

// freeLoopbackAddr is a loopback address with a port nothing listens on.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func syncPoint(cfg SyncConfig, env *kubeenv.Env, n, eps int) (SyncResult, error) {
	r := SyncResult{Commit: Commit(), Services: n, Endpoints: eps}
	pins := filepath.Join(datapath.BPFFS, fmt.Sprintf("netcube-bench-sync-%d", os.Getpid()))
	_ = datapath.Unpin(pins)
	defer datapath.Unpin(pins)

	starts := cfg.Starts
	if starts <= 0 {
		starts = 3
	}
	// Starts on empty maps; the last agent stays for the endpoint changes.
	var first, gzip timings
	pages := make([]timings, len(cfg.PageSizes))
	var a *agentProc
	for i := range starts {
		if cfg.GzipLists {
			_ = datapath.Unpin(pins)
			if err := gzip.measure(cfg, env, pins, "gzip", "--api-compression"); err != nil {
				return r, err
			}
		}
		for j, size := range cfg.PageSizes {
			_ = datapath.Unpin(pins)
			if err := pages[j].measure(cfg, env, pins, fmt.Sprintf("pages-%d", size), fmt.Sprintf("--api-list-page-size=%d", size)); err != nil {
				return r, err
			}
		}
		_ = datapath.Unpin(pins)
		var err error
		if a, err = startBenchAgent(cfg, env, pins, "first"); err != nil {
			return r, err
		}
		if err := first.add(a); err != nil {
			a.stop()
			return r, err
		}
		if i < starts-1 {
			a.stop()
		}
	}
	defer a.stop()
	r.StartToReady, r.FullSyncFirst, r.FirstEventToAppliedFirst = first.medians()
	r.Split = first.split()
	r.APIServerCPUFirst = medianOf(first.apiCPU)
	r.PeakRSSAtReadyMB = medianOf(first.rss)
	for j, size := range cfg.PageSizes {
		t := &pages[j]
		sp := t.split()
		r.PageSizes = append(r.PageSizes, SyncPageSize{PageSize: size, StartToReady: medianOf(t.ready), ListMS: sp.ListMS, DecodeMS: sp.DecodeMS,
			APIServerCPU: medianOf(t.apiCPU), PeakRSSAtReadyMB: medianOf(t.rss)})
	}
	if cfg.GzipLists {
		sp := gzip.split()
		r.Gzip = &SyncGzip{StartToReady: medianOf(gzip.ready), ListMS: sp.ListMS, DecodeMS: sp.DecodeMS, APIServerCPU: medianOf(gzip.apiCPU)}
	}
	if dir := os.Getenv("NETCUBE_BENCH_PROFILES"); dir != "" { // the heap as of the initial sync's last GC
		a.saveHeapProfile(filepath.Join(dir, fmt.Sprintf("agent-heap-%d-%d-synced.pprof", n, eps)))
		<-a.cpuProfiled
	}

	maps, closeMaps, err := datapath.OpenPinned(pins)
	if err != nil {
		return r, err
	}
	defer closeMaps()
	svcs, err := env.Client.CoreV1().Services(benchNS).List(context.Background(), metav1.ListOptions{Limit: 1})
	if err != nil || len(svcs.Items) == 0 {
		return r, fmt.Errorf("list a Service: %v", err)
	}
	// Endpoint changes: rewrite one Service's slice, wait for the new
	// backend in the maps.
	var lat []float64
	before := scrapeHistogram(a.metrics, "netcube_event_to_programmed_seconds")
	for k := range cfg.Changes {
		i := rand.IntN(n)
		svc, err := env.Client.CoreV1().Services(benchNS).Get(context.Background(), serviceName(i), metav1.GetOptions{})
		if err != nil {
			return r, err
		}
		fe := model.Frontend{Addr: netip.MustParseAddr(svc.Spec.ClusterIP), Port: 80, Proto: model.TCP}
		gen := k + 1
		want := model.Backend{Addr: backendIP(i, 0, gen), Port: 8080}
		t0 := time.Now()
		if _, err := env.Client.DiscoveryV1().EndpointSlices(benchNS).Update(context.Background(), benchSlice(i, eps, gen), metav1.UpdateOptions{}); err != nil {
			return r, err
		}
		for {
			bs, _, err := lb.Lookup(maps, fe)
			if err == nil && slices.Contains(bs, want) {
				break
			}
			if time.Since(t0) > 30*time.Second {
				return r, fmt.Errorf("change to %s not programmed after 30s", fe)
			}
			time.Sleep(20 * time.Microsecond)
		}
		lat = append(lat, ms(time.Since(t0)))
		// Put the endpoint back so each size starts from the same state.
		if _, err := env.Client.DiscoveryV1().EndpointSlices(benchNS).Update(context.Background(), benchSlice(i, eps, 0), metav1.UpdateOptions{}); err != nil {
			return r, err
		}
	}
	slices.Sort(lat)
	r.WriteToMapP50, r.WriteToMapP99 = quantile(lat, 0.5), quantile(lat, 0.99)
	after := scrapeHistogram(a.metrics, "netcube_event_to_programmed_seconds")
	r.EventToMapP50, r.EventToMapP99 = histQuantile(before, after, 0.5)*1e3, histQuantile(before, after, 0.99)*1e3
	time.Sleep(200 * time.Millisecond) // the put-backs are applied
	r.CPUSeconds, r.PeakRSSMB = a.usage()
	if dir := os.Getenv("NETCUBE_BENCH_PROFILES"); dir != "" { // where the memory goes
		a.saveHeapProfile(filepath.Join(dir, fmt.Sprintf("agent-heap-%d-%d.pprof", n, eps)))
	}
	a.stop()

	// Restart against the pinned maps: nothing changed meanwhile.
	var restart timings
	for range starts {
		if err := restart.measure(cfg, env, pins, "restart"); err != nil {
			return r, err
		}
	}
	r.RestartToReady, r.FullSyncRestart, r.FirstEventToAppliedRestart = restart.medians()
	r.RestartMapUpdates = slices.Max(restart.updates)
	return r, nil
}

// timings collects the initial-sync figures of agent starts.
type timings struct {
	ready, apply, wall []float64
	apiCPU             []float64 // the API server's CPU seconds, start -> ready
	rss                []float64 // the agent's peak RSS (MB) as of ready
	updates            []int
	phases             []SyncSplit
}

func (t *timings) add(a *agentProc) error {
	s, err := a.initialSync()
	if err != nil {
		return err
	}
	t.ready, t.apply, t.wall = append(t.ready, ms(a.ready)), append(t.apply, ms(s.apply)), append(t.wall, ms(s.wall))
	t.updates = append(t.updates, s.updates)
	t.apiCPU = append(t.apiCPU, a.apiCPU)
	_, rss := procUsage(a.cmd.Process.Pid)
	t.rss = append(t.rss, rss)
	t.phases = append(t.phases, s.split)
	return nil
}

// measure starts an agent on pins, records its initial sync and stops it.
func (t *timings) measure(cfg SyncConfig, env *kubeenv.Env, pins, run string, extra ...string) error {
	a, err := startBenchAgent(cfg, env, pins, run, extra...)
	if err != nil {
		return err
	}
	defer a.stop()
	return t.add(a)
}

func (t *timings) medians() (ready, apply, wall float64) {
	return medianOf(t.ready), medianOf(t.apply), medianOf(t.wall)
}

// split is the starts' phases, each the median of its own.
func (t *timings) split() SyncSplit {
	of := func(f func(SyncSplit) float64) float64 {
		xs := make([]float64, len(t.phases))
		for i, p := range t.phases {
			xs[i] = f(p)
		}
		return medianOf(xs)
	}
	return SyncSplit{
		ListMS:     of(func(p SyncSplit) float64 { return p.ListMS }),
		DecodeMS:   of(func(p SyncSplit) float64 { return p.DecodeMS }),
		ConvertMS:  of(func(p SyncSplit) float64 { return p.ConvertMS }),
		ComputeMS:  of(func(p SyncSplit) float64 { return p.ComputeMS }),
		MapWriteMS: of(func(p SyncSplit) float64 { return p.MapWriteMS }),
	}
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, 0.5)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// histogram is a scraped Prometheus histogram: upper bounds -> cumulative counts.
type histogram map[float64]float64

func scrapeHistogram(addr, name string) histogram {
	h := histogram{}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return h
	}
	defer resp.Body.Close()
	re := regexp.MustCompile(`^` + name + `_bucket\{le="([^"]+)"\} ([0-9.e+]+)$`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			le, _ := strconv.ParseFloat(m[1], 64)
			if m[1] == "+Inf" {
				le = 1e9
			}
			v, _ := strconv.ParseFloat(m[2], 64)
			h[le] = v
		}
	}
	return h
}

// histQuantile estimates a quantile of the observations made between two
// scrapes, interpolating linearly within a bucket (as histogram_quantile).
func histQuantile(before, after histogram, q float64) float64 {
	var bounds []float64
	for le := range after {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	total := after[1e9] - before[1e9]
	if total == 0 {
		return 0
	}
	rank, prevLE, prevCount := q*total, 0.0, 0.0
	for _, le := range bounds {
		count := after[le] - before[le]
		if count >= rank {
			if count == prevCount {
				return le
			}
			return prevLE + (le-prevLE)*(rank-prevCount)/(count-prevCount)
		}
		prevLE, prevCount = le, count
	}
	return bounds[len(bounds)-1]
}
