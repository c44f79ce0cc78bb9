// Package agent wires one node's netcube together: it loads the datapath
// (reusing pinned maps and links) with the registered cubes' maps, attaches
// the programs to the node's uplinks, the pods' interfaces and cgroup,
// starts every registered cube (package cubes) with its own maps, runs a
// state source (Kubernetes API or YAML directory) into the cube that
// reconciles Services, and serves metrics and health. A hollow agent
// (--datapath=memory, datapath.go) does the same with the maps in memory
// and nothing loaded or attached. It owns no logic of its own beyond that
// wiring.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/netcube/netcube/pkg/cni"
	"github.com/netcube/netcube/pkg/cni/cnisocket"
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes"
	"github.com/netcube/netcube/pkg/datapath"
	hubblemetrics "github.com/netcube/netcube/pkg/hubble/metrics"
	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/lbipam"
	"github.com/netcube/netcube/pkg/localapi"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/podnetns"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
	"github.com/netcube/netcube/pkg/source/kube"
	"github.com/netcube/netcube/pkg/source/yamldir"
)

// Run runs the agent until ctx ends. The datapath is left in place on exit.
func Run(ctx context.Context, cfg Config) error {
	if _, set := os.LookupEnv("GOGC"); !set && cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if err := checkDatapath(cfg); err != nil {
		return err
	}
	rep := report.New()
	if cfg.Manifests == "" {
		if rc, err := restConfig(cfg); err == nil {
			sizeIdentityMaps(ctx, &cfg, rc)
		}
	}
	src, err := newSource(cfg, rep)
	if err != nil {
		return err
	}
	// The source lists from the API server while the datapath loads (the
	// verifier's second or so): what it hands on is kept until the cubes
	// can take it.
	early := &source.Deferred{}
	srcCtx, stopSource := context.WithCancel(ctx)
	defer stopSource()
	errc := make(chan error, 1)
	go func() { errc <- src.Run(srcCtx, early) }()
	hollow := cfg.Datapath == DatapathMemory
	var dp nodeDatapath
	var kdp *datapath.Datapath // nil when hollow
	settings := cube.Settings{SocketLB: cfg.SocketLB, Cgroup: cfg.Cgroup, LBAlgorithm: cfg.LBAlgorithm, Hollow: hollow}
	if settings.NodePortLo, settings.NodePortHi, err = ParsePortRange(cfg.NodePortRange); err != nil {
		return fmt.Errorf("--nodeport-range: %w", err)
	}
	if settings.HubbleMetrics, err = hubblemetrics.Parse(cfg.HubbleMetrics); err != nil {
		return err
	}
	if err := checkPodDevice(cfg.PodDevice, hollow); err != nil {
		return err
	}
	if err := cfg.Hubble.tcp().Check(); err != nil { // before anything is loaded: fail closed, at once
		return err
	}
	if cfg.UplinkRate != "" {
		if settings.UplinkRate, err = k8s.ParseBandwidth(cfg.UplinkRate); err != nil {
			return fmt.Errorf("--uplink-rate: %w", err)
		}
	}
	node, uplinkMTU, uplinks := model.Node{Name: cfg.NodeName}, 0, []string(nil)
	if hollow {
		if dp, err = newMemoryDatapath(cfg); err != nil {
			return err
		}
		slog.Info("datapath in memory (hollow agent): no BPF loaded, nothing on the host changed (--bpf-root unused)", "node", cfg.NodeName)
	} else {
		if kdp, err = loadKernelDatapath(cfg); err != nil {
			return err
		}
		defer kdp.Close()
		dp = kdp
		if cfg.PodDevice == cni.PodDeviceNetkit { // loaded now, not in the first pod's ADD
			if err := kdp.LoadNetkitPrograms(); err != nil {
				return err
			}
		}
		if node, uplinkMTU, uplinks, err = setupNode(kdp, cfg.NodeName, cfg.NodeInterfaces, cfg.NodePortAcceleration); err != nil {
			return err
		}
	}
	settings.Routing, settings.PodIfacePrefix, settings.UplinkMTU = cfg.Routing, cfg.PodIfacePrefix, uplinkMTU
	settings.Uplinks = uplinks
	settings.Masquerade = cfg.Masquerade
	settings.ConntrackGCInterval = cfg.Conntrack.GCInterval.Duration
	settings.MonitorDrops, settings.MonitorPolicy, settings.MonitorTrace = cfg.Monitor.Drops, cfg.Monitor.Policy, cfg.Monitor.Trace
	settings.MonitorCubes = cfg.Monitor.Cubes
	for i, c := range cfg.NoMasquerade {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return fmt.Errorf("--no-masquerade[%d]: %q is not a CIDR", i, c)
		}
		settings.NoMasquerade = append(settings.NoMasquerade, p.Masked())
	}
	if cfg.MTU == 0 {
		cfg.MTU = podMTU(cfg.Routing, uplinkMTU)
	}

	m := newMetrics(rep)
	settings.HubbleSocket = cfg.HubbleSocket
	settings.HubbleListenAddress, settings.HubbleDisableTLS = cfg.Hubble.ListenAddress, cfg.Hubble.DisableTLS
	settings.HubbleTLSCertFile, settings.HubbleTLSKeyFile = cfg.Hubble.TLSCertFile, cfg.Hubble.TLSKeyFile
	settings.HubbleTLSClientCAFiles, settings.ClusterName = cfg.Hubble.TLSClientCAFiles, cfg.ClusterName
	cs, stop, err := startCubes(ctx, dp, m, cube.Env{Program: dp.Program, Node: node, Settings: settings, Report: rep, Names: &cube.Names{Netns: podnetns.New()}})
	defer stop()
	if err != nil {
		return err
	}
	rec := cs.rec
	bgpc, err := newBGP(cfg, rep, rec)
	if err != nil {
		return err
	}
	ph, _ := cs.policy.(policyHealth)
	if err := serve(ctx, cfg, m, rec, ph, src); err != nil {
		return err
	}
	if cs.api == nil {
		cs.api = map[string]http.Handler{}
	}
	cs.api[localapi.StatusPath] = statusHandler(cfg.NodeName, time.Now(), m, rec, ph)
	cs.api[localapi.BGPPath] = bgpc.handler()
	l2, err := startL2Announce(ctx, cfg, hollow, node, uplinks, rec, cs.api, m.registry) // l2.go
	if err != nil {
		return err
	}
	if err := serveAPI(ctx, cfg.APISocket, cs.api); err != nil {
		return err
	}

	if !hollow {
		if err := startPodNetwork(ctx, cfg, kdp, cs.pods, cs.policy); err != nil {
			return err
		}
		// Every hook now runs this agent's programs: what the earlier
		// agent's wrote meanwhile to a map this one took over can be
		// copied.
		kdp.CatchUpCarryOver()
	}
	tee := nodeTee{Handler: rec, name: cfg.NodeName, nodes: append(append(cs.nodes, bgpc.ctl), l2.nodes...), bgp: bgpc.ctl}
	if cfg.CNIConfDir != "" {
		tee.cni = &cniConfig{cfg: cfg}
	}
	var handler source.Handler = tee
	if cs.policy != nil {
		handler = policyTee{nodeTee: tee, PolicyHandler: cs.policy}
		if cs.slices != nil {
			handler = slicesTee{policyTee: policyTee{nodeTee: tee, PolicyHandler: cs.policy}, slices: cs.slices}
		}
	}
	go rec.Run(ctx)
	bgpc.start(ctx)
	defer bgpc.wait()
	early.Attach(handler)

	select {
	case <-rec.Synced():
		fields := rec.Summary()
		if p, ok := src.(interface{ ListPhases() []any }); ok { // the sync benchmark's time split
			fields = append(fields, p.ListPhases()...)
		}
		slog.Info("initial sync applied", fields...)
		bgpc.ctl.ServicesSynced()
		if cfg.ReadyFile != "" {
			if err := os.WriteFile(cfg.ReadyFile, []byte("ready\n"), 0o644); err != nil {
				return err
			}
		}
	case err := <-errc:
		return fmt.Errorf("state source: %w", err)
	case <-ctx.Done():
		return nil
	}
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("state source: %w", err)
		}
		<-ctx.Done()
	case <-ctx.Done():
	}
	slog.Info("agent stopping; the datapath stays in place")
	return nil
}

// started is what the cubes gave the agent to run.
type started struct {
	rec   cube.Reconciler    // the one that reconciles Services
	nodes []cube.NodeHandler // told of every Node
	pods  []cube.PodHandler  // told of every pod the CNI plugin wires
	// policy is given the cluster's pods, namespaces and NetworkPolicies.
	policy source.PolicyHandler
	// slices is given the cluster's NetworkSlices, pods and namespaces.
	slices cube.SliceHandler
	// api are the paths the cubes serve on the local API.
	api map[string]http.Handler
}

// startCubes starts every registered cube, each with its own maps, and
// attaches the programs of the devices they made; stop stops them all.
func startCubes(ctx context.Context, dp nodeDatapath, m *metrics, env cube.Env) (cs started, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for _, c := range cubes.All {
		e := env
		e.Maps = dp.MapsOf(c)
		e.Maps.Observe = m.observeMap
		st, err := c.Start(ctx, e)
		if err != nil {
			return cs, stop, fmt.Errorf("cube %s: %w", c.Name(), err)
		}
		if st.Stop != nil {
			stops = append(stops, st.Stop)
		}
		env.Names.Add(st.PodNames, st.ServiceNames, st.PolicyNames)
		m.registry.MustRegister(st.Metrics...)
		if st.Reconciler != nil {
			if cs.rec != nil {
				return cs, stop, fmt.Errorf("cube %s: a second cube reconciling Services", c.Name())
			}
			cs.rec = st.Reconciler
		}
		if st.Nodes != nil {
			cs.nodes = append(cs.nodes, st.Nodes)
		}
		if st.Pods != nil {
			cs.pods = append(cs.pods, st.Pods)
		}
		for path, h := range st.API {
			if cs.api == nil {
				cs.api = map[string]http.Handler{}
			}
			if _, dup := cs.api[path]; dup {
				return cs, stop, fmt.Errorf("cube %s: API path %s served by another cube", c.Name(), path)
			}
			cs.api[path] = h
		}
		if st.Slices != nil {
			if cs.slices != nil {
				return cs, stop, fmt.Errorf("cube %s: a second cube placing pods in network slices", c.Name())
			}
			cs.slices = st.Slices
		}
		if st.Policy != nil {
			if cs.policy != nil {
				return cs, stop, fmt.Errorf("cube %s: a second cube enforcing NetworkPolicy", c.Name())
			}
			cs.policy = st.Policy
		}
		for _, ifc := range st.Interfaces {
			dev, err := net.InterfaceByName(ifc.Name)
			if err != nil {
				return cs, stop, fmt.Errorf("cube %s: %w", c.Name(), err)
			}
			if err := dp.AttachInterface(ifc.Name, dev.Index, ifc.Ingress, ifc.Egress); err != nil {
				return cs, stop, fmt.Errorf("cube %s: %w", c.Name(), err)
			}
		}
	}
	if cs.rec == nil {
		return cs, stop, errors.New("no registered cube reconciles Services")
	}
	return cs, stop, nil
}

// newSource picks the state source: a YAML directory, or the Kubernetes API
// (kubeconfig, or in-cluster config), whose problems go to rep (and, from
// the API, as Events on the objects).
// restConfig is the API server's address and credentials: --kubeconfig,
// or the Pod's own.
func restConfig(cfg Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("Kubernetes API config (give --kubeconfig, or --manifests for a YAML directory): %w", err)
	}
	rc.UserAgent = "netcube-agent"
	return rc, nil
}

func newSource(cfg Config, rep *report.Reporter) (source.Source, error) {
	if cfg.Manifests != "" {
		return &yamldir.Source{Dir: cfg.Manifests, Report: rep}, nil
	}
	rc, err := restConfig(cfg)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 50, 100
	// Protobuf: a third of JSON's size on the wire and far less garbage
	// when listing 100,000 objects.
	switch cfg.APIContentType {
	case "", APIProtobuf:
		rc.ContentType = runtime.ContentTypeProtobuf
		rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	case APIJSON:
		rc.ContentType, rc.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	default:
		return nil, fmt.Errorf("--api-content-type (apiContentType) %q: want %s or %s", cfg.APIContentType, APIProtobuf, APIJSON)
	}
	rc.DisableCompression = !cfg.APICompression
	if cfg.APIListPageSize < 0 {
		return nil, fmt.Errorf("--api-list-page-size (apiListPageSize) %d: want a positive number of objects, or 0 for the default", cfg.APIListPageSize)
	}
	events, err := kube.NewEventSink(rc, cfg.NodeName)
	if err != nil {
		return nil, err
	}
	rep.Sink = events
	switch cfg.PodSource {
	case "", kube.PodsFromAPI, kube.PodsFromNodePods:
	default:
		return nil, fmt.Errorf("--pod-source (podSource) %q: want %s or %s", cfg.PodSource, kube.PodsFromAPI, kube.PodsFromNodePods)
	}
	s := &sourceWithEvents{Source: &kube.Source{Config: rc, ProxyName: cfg.ProxyName, Report: rep, WatchList: cfg.APIWatchList,
		PageSize: cfg.APIListPageSize, NodeName: cfg.NodeName, PodSource: cfg.PodSource}, events: events}
	if cfg.LoadBalancerIPs {
		if s.pools, err = newPoolGuard(rc, rep); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// newPoolGuard watches the NetworkLoadBalancerPools: netcube-operator
// assigns the LoadBalancer IPs from them, and the agent serves only
// ingress addresses that lie in one.
func newPoolGuard(rc *rest.Config, rep *report.Reporter) (*poolGuard, error) {
	// JSON: the dynamic client reads no protobuf.
	jc := rest.CopyConfig(rc)
	jc.ContentType, jc.AcceptContentTypes = "application/json", "application/json"
	dyn, err := dynamic.NewForConfig(jc)
	if err != nil {
		return nil, err
	}
	return &poolGuard{guard: &lbipam.PoolGuard{Report: rep}, client: dyn}, nil
}

type poolGuard struct {
	guard  *lbipam.PoolGuard
	client dynamic.Interface
}

// sourceWithEvents runs the API source with its Event writer and, when
// netcube assigns LoadBalancer IPs, the pool guard between the source's
// Services and the handler.
type sourceWithEvents struct {
	*kube.Source
	events *kube.EventSink
	pools  *poolGuard // nil: every ingress address is served
}

// allHandlers is what the agent hands its source (a source.Deferred).
type allHandlers interface {
	source.Handler
	source.PolicyHandler
	source.ClusterPolicyHandler
	source.SliceHandler
	source.BGPHandler
}

// guarded is h with its Services passed through the pool guard.
type guarded struct {
	allHandlers
	guard *lbipam.PoolGuard
}

func (g guarded) OnService(k types.NamespacedName, s *model.Service) { g.guard.OnService(k, s) }

func (s *sourceWithEvents) Run(ctx context.Context, h source.Handler) error {
	go s.events.Run(ctx)
	if s.pools != nil {
		all, ok := h.(allHandlers)
		if !ok {
			return fmt.Errorf("the pool guard needs a handler of every kind, got %T", h)
		}
		s.pools.guard.Next = h.OnService
		h = guarded{allHandlers: all, guard: s.pools.guard}
		go s.pools.guard.Watch(ctx, s.pools.client)
		// The pools first: a Service handed on before them would have
		// its LoadBalancer IPs taken away, then given back.
		select {
		case <-s.pools.guard.Synced():
		case <-ctx.Done():
			return nil
		}
	}
	return s.Source.Run(ctx, h)
}

// serve starts the metrics and health endpoints. /healthz says the agent is
// alive (and, as kube-proxy's, when it last synced); /readyz that its first
// sync is applied (the Services', and the NetworkPolicies' when ph, the
// policy cube, is given), no Service is failing, every pod's policy is
// written, and the API server has not been unreachable for longer than
// the grace.
func serve(ctx context.Context, cfg Config, m *metrics, rec cube.Reconciler, ph policyHealth, src source.Source) error {
	reach, _ := src.(interface{ Unreachable() time.Duration })
	health := http.NewServeMux()
	// kube-proxy's shape, which tools (and the e2e suite) read: when the
	// datapath last synced, and now.
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"lastUpdated": %q, "currentTime": %q}`+"\n",
			m.lastSync().UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano))
	})
	health.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-rec.Synced():
		default:
			http.Error(w, "initial sync not applied yet", http.StatusServiceUnavailable)
			return
		}
		if reach != nil {
			if d := reach.Unreachable(); d > cfg.APIUnreachableGrace.Duration {
				http.Error(w, fmt.Sprintf("the API server has been unreachable for %s (grace %s); the datapath keeps its last state",
					d.Round(time.Second), cfg.APIUnreachableGrace.Duration), http.StatusServiceUnavailable)
				return
			}
		}
		if ph != nil {
			select {
			case <-ph.PolicySynced():
			default:
				http.Error(w, "initial NetworkPolicy sync not applied yet", http.StatusServiceUnavailable)
				return
			}
		}
		if f := failures(rec, ph); len(f) > 0 {
			var b strings.Builder
			for _, id := range slices.Sorted(maps.Keys(f)) {
				fmt.Fprintf(&b, "%s: %v\n", id, f[id])
			}
			http.Error(w, b.String(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", m.handler())
	// kube-proxy answers its mode here; netcube is its own.
	metricsMux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "netcube") })
	if cfg.Profiling {
		metricsMux.HandleFunc("/debug/pprof/", pprof.Index)
		metricsMux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	for _, s := range []struct {
		flag, addr string
		h          http.Handler
	}{{"healthz-bind-address", cfg.HealthzBindAddress, health}, {"metrics-bind-address", cfg.MetricsBindAddress, metricsMux}} {
		addr, err := resolveBindAddress(s.flag, s.addr)
		if err != nil {
			return err
		}
		if addr == "" {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(l) }()
		go func() { <-ctx.Done(); _ = srv.Close() }()
		slog.Info("serving", "addr", l.Addr().String())
	}
	return nil
}

// startPodNetwork attaches to the pods already wired, then serves the CNI
// plugin's socket and installs the plugin binary (when asked to). With a
// cube enforcing NetworkPolicy (pol), the socket answers ADD only once
// the pod's policy is written (cnisocket.WithPolicy).
func startPodNetwork(ctx context.Context, cfg Config, dp *datapath.Datapath, handlers []cube.PodHandler, pol source.PolicyHandler) error {
	p := &pods{dp: dp, prefix: cfg.PodIfacePrefix, handlers: handlers}
	if err := p.attachExisting(); err != nil {
		return err
	}
	if cfg.CNIBinDir != "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		if err := cni.InstallPlugin(filepath.Join(filepath.Dir(exe), cni.PluginType), cfg.CNIBinDir); err != nil {
			return err
		}
		slog.Info("CNI plugin installed", "dir", cfg.CNIBinDir)
	}
	if cfg.CNISocket == "" {
		return nil
	}
	var h cnisocket.AgentHandler = p
	if pp, ok := pol.(cnisocket.PodPolicy); ok {
		h = cnisocket.WithPolicy(p, pp)
	} else if pol != nil {
		return fmt.Errorf("the cube enforcing NetworkPolicy (%T) cannot write a pod's policy before its CNI ADD returns", pol)
	}
	return cnisocket.Serve(ctx, cfg.CNISocket, h)
}
