package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble"
	hubblemetrics "github.com/netcube/netcube/pkg/hubble/metrics"
	"github.com/netcube/netcube/pkg/model"
)

// The monitor cube's maps (bpf/cubes/monitor/monitor_maps.h).
const (
	MapConfig = "monitor_config"
	MapDrops  = "monitor_drops"
	MapStats  = "monitor_stats"
	MapEvents = "monitor_events"
	MapXDP    = "monitor_xdp"
)

// APIPath is where the agent's local API serves the events (one JSON
// object per line, as they come).
const APIPath = "/v1/monitor"

// Cube is the monitor cube as the registry lists it.
type Cube struct{}

var _ cube.Cube = Cube{}

func (Cube) Name() string { return "monitor" }

func (Cube) Maps() []cube.MapSpec {
	// Counters, scratch and the agent's own setting: a new reason or cube
	// replaces an earlier agent's pins rather than stopping this one.
	return []cube.MapSpec{{Name: MapConfig, Restart: true}, {Name: MapDrops, Restart: true}, {Name: MapStats, Restart: true},
		{Name: MapCubes, Restart: true}, {Name: MapXDP, Restart: true}, {Name: MapEvents}}
}

// DefaultFlags is what the datapath reports with the agent's defaults
// (pkg/agent): drops, policy verdicts, and each cube's packets.
const DefaultFlags = datapath.MonFlagDrops | datapath.MonFlagPolicy | datapath.MonFlagCubes

// Flags turns the agent's settings into what the datapath reports.
func Flags(s cube.Settings) datapath.MonFlags {
	var f datapath.MonFlags
	if s.MonitorDrops {
		f |= datapath.MonFlagDrops
	}
	if s.MonitorPolicy {
		f |= datapath.MonFlagPolicy
	}
	if s.MonitorTrace {
		f |= datapath.MonFlagTrace
	}
	if s.MonitorCubes {
		f |= datapath.MonFlagCubes
	}
	return f
}

// Start tells the datapath what to report and reads its events.
func (Cube) Start(ctx context.Context, env cube.Env) (cube.Started, error) {
	if err := SetFlags(env.Maps, Flags(env.Settings)); err != nil {
		return cube.Started{}, err
	}
	hub := events.NewHub()
	m := newMetrics(env.Maps, hub)
	lost := func() uint64 { return cube.PerCPUSum(env.Maps.Map(MapStats), uint32(datapath.MonStatLost)) }
	st := cube.Started{Metrics: []prometheus.Collector{m}, API: map[string]http.Handler{APIPath: Handler(hub, lost)}}
	if len(env.Settings.HubbleMetrics) > 0 {
		hm, err := hubblemetrics.New(env.Settings.HubbleMetrics)
		if err != nil {
			return cube.Started{}, err
		}
		hm.Run(ctx, hub)
		st.Metrics = append(st.Metrics, hm)
	}
	km, ok := env.Maps.Map(MapEvents).(interface{ Unwrap() *ebpf.Map })
	if !ok {
		return st, nil // maps in memory (tests): no ring buffer to read
	}
	rd, err := NewReader(km.Unwrap())
	if err != nil {
		return cube.Started{}, fmt.Errorf("monitor events: %w", err)
	}
	n := &namer{names: env.Names, services: map[uint32]cachedName{}}
	go rd.Run(func(e events.Event) {
		n.name(&e)
		m.count(e)
		hub.Publish(e)
	})
	if tcp := HubbleTCP(env.Settings); env.Settings.HubbleSocket != "" || tcp.Enabled() {
		peers := hubble.NewPeers(hubble.PeersConfig{Port: listenPort(tcp), TLS: tcp.Enabled() && !tcp.DisableTLS, Cluster: env.Settings.ClusterName})
		srv := hubble.New(hubble.Config{Node: env.Node.Name, Hub: hub, Names: env.Names, DatapathLost: lost, Peers: peers})
		if err := srv.Serve(ctx, env.Settings.HubbleSocket, tcp); err != nil {
			_ = rd.Close()
			return cube.Started{}, err
		}
		st.Nodes = peers
	}
	slog.Info("monitor", "cubes", env.Settings.MonitorCubes, "drops", env.Settings.MonitorDrops, "policy", env.Settings.MonitorPolicy, "trace", env.Settings.MonitorTrace)
	st.Stop = func() { _ = rd.Close() }
	return st, nil
}

// SetFlags writes what the datapath reports (monitor_config).
func SetFlags(maps *cube.Maps, f datapath.MonFlags) error {
	return cube.Put(maps, MapConfig, uint32(0), datapath.MonConfig{Flags: f})
}

// Handler streams the hub's events, one JSON object per line, until the
// client goes; a Loss line tells what the client missed. A client that
// reads slowly loses events, never blocks the agent. datapathLost reads
// the ring buffer's losses so far (nil: not known).
func Handler(hub *events.Hub, datapathLost func() uint64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub := hub.Subscribe(1024)
		defer sub.Close()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		flusher, _ := w.(http.Flusher)
		flush := func() {
			if flusher != nil {
				flusher.Flush()
			}
		}
		flush()
		enc := json.NewEncoder(w)
		var toldSub, toldDP uint64
		if datapathLost != nil {
			toldDP = datapathLost()
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		tell := func() bool {
			var l events.Loss
			if n := sub.Lost(); n != toldSub {
				l.Subscriber, toldSub = n-toldSub, n
			}
			if datapathLost != nil {
				if n := datapathLost(); n != toldDP {
					l.Datapath, toldDP = n-toldDP, n
				}
			}
			if l == (events.Loss{}) {
				return true
			}
			return enc.Encode(l) == nil
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
				if !tell() {
					return
				}
				flush()
			case e, ok := <-sub.C:
				if !ok || !tell() || enc.Encode(e) != nil {
					return
				}
				if len(sub.C) == 0 {
					flush()
				}
			}
		}
	})
}

// namer names the events' pods and Service, as the cubes know them. It
// runs on the reader's goroutine alone; a Service's name by revNAT id
// (a map lookup in the lb cube) is kept a few seconds.
type namer struct {
	names    *cube.Names
	services map[uint32]cachedName
}

type cachedName struct {
	name string
	at   time.Time
}

const serviceNameTTL = 5 * time.Second

func (n *namer) name(e *events.Event) {
	if !e.Src.IsValid() && e.NetnsCookie != 0 {
		// A socket hook's event: the pod is its socket's namespace.
		if a, ok := n.names.AddrOfNetns(e.NetnsCookie, e.Family); ok {
			e.Src = netip.AddrPortFrom(a, 0)
		}
	}
	pod := func(ap netip.AddrPort) string {
		if !ap.IsValid() {
			return ""
		}
		if id, _, ok := n.names.PodAt(ap.Addr()); ok {
			return id.String()
		}
		return ""
	}
	e.SrcPod, e.DstPod = pod(e.Src), pod(e.Dst)
	if p := e.Policy; p != nil && e.Src.IsValid() && e.Dst.IsValid() {
		local, peer, egress := e.Dst.Addr(), e.Src.Addr(), p.Direction == "egress"
		if egress {
			local, peer = peer, local
		}
		p.Policies = n.names.PoliciesOf(local, egress, peer, e.L4(), e.Dst.Port(), e.Type != "drop")
	}
	if e.ServiceID != 0 {
		c, ok := n.services[e.ServiceID]
		if !ok || time.Since(c.at) > serviceNameTTL {
			c = cachedName{at: time.Now()}
			if id, ok := n.names.ServiceByRevNAT(e.ServiceID); ok {
				c.name = id.String()
			}
			n.services[e.ServiceID] = c
		}
		if e.Service = c.name; e.Service != "" {
			return
		}
	}
	if e.Dst.IsValid() {
		proto := e.L4()
		if proto == 0 {
			proto = model.TCP
		}
		if id, ok := n.names.ServiceAt(model.Frontend{Addr: e.Dst.Addr(), Port: e.Dst.Port(), Proto: proto}); ok {
			e.Service = id.String()
		}
	}
}

// HubbleTCP is the Hubble server's TCP listener the settings ask for.
func HubbleTCP(s cube.Settings) hubble.TCP {
	return hubble.TCP{Address: s.HubbleListenAddress, CertFile: s.HubbleTLSCertFile, KeyFile: s.HubbleTLSKeyFile,
		ClientCAFiles: s.HubbleTLSClientCAFiles, DisableTLS: s.HubbleDisableTLS}
}

// listenPort is the port tcp listens on (what the Peer service tells
// hubble-relay to dial on every node); 0: no TCP listener.
func listenPort(tcp hubble.TCP) int {
	if !tcp.Enabled() {
		return 0
	}
	_, port, err := net.SplitHostPort(tcp.Address)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}
