package hubble

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble/flowpb"
	"github.com/netcube/netcube/pkg/hubble/observerpb"
	"github.com/netcube/netcube/pkg/hubble/peerpb"
)

// Config is what the server serves.
type Config struct {
	Node  string      // this node's name
	Hub   *events.Hub // the datapath's events
	Names *cube.Names // names pods and Services
	// DatapathLost reads the events the datapath lost so far (its ring
	// buffer full); nil: not known.
	DatapathLost func() uint64
	// Capacity is how many recent flows are kept for requests that ask
	// for the last N (default 4096).
	Capacity int
	Version  string
	// Peers, if set, is served as Hubble's Peer service beside the
	// Observer (hubble-relay finds every node's server by it).
	Peers *Peers
}

// Server is a Hubble Observer for one node.
type Server struct {
	cfg     Config
	started time.Time

	mu sync.Mutex
	// ring keeps the last Capacity events (oldest at next once full) as
	// they came: each becomes a flow only for a client that asks, so an
	// event no one reads costs a copy, not a conversion.
	ring []events.Event
	next int
	seen uint64
	// clientLost: flows followers had no room for, all of them.
	clientLost uint64
	followers  map[*follower]struct{}
}

// follower is a GetFlows request with follow: the events it has not sent.
type follower struct {
	c    chan events.Event
	lost uint64 // events it had no room for (under Server.mu)
}

// followBuffer is how many flows a following client may be behind before
// it loses some (told to it as a LostEvent).
const followBuffer = 4096

// New returns a server of cfg's events.
func New(cfg Config) *Server {
	if cfg.Capacity <= 0 {
		cfg.Capacity = 4096
	}
	if cfg.Version == "" {
		cfg.Version = "netcube"
	}
	return &Server{cfg: cfg, started: time.Now(), followers: map[*follower]struct{}{}}
}

// Serve serves the Observer API, the Peer service (when Config.Peers is
// set) and gRPC health (which hubble status asks first) on a unix socket
// ("": none) and on tcp's listener (when enabled) until ctx ends.
func (s *Server) Serve(ctx context.Context, socket string, tcp TCP) error {
	var listeners []net.Listener
	fail := func(err error) error {
		for _, l := range listeners {
			l.Close()
		}
		return err
	}
	if socket != "" {
		l, err := listenUnix(socket)
		if err != nil {
			return err
		}
		listeners = append(listeners, l)
	}
	servers := []*grpc.Server{}
	if len(listeners) == 1 {
		servers = append(servers, s.grpcServer())
	}
	if tcp.Enabled() {
		var opts []grpc.ServerOption
		if !tcp.DisableTLS {
			tc, err := tcp.TLSConfig()
			if err != nil {
				return fail(err)
			}
			opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
		} else if err := tcp.Check(); err != nil {
			return fail(err)
		}
		l, err := net.Listen("tcp", tcp.Address)
		if err != nil {
			return fail(fmt.Errorf("--hubble-listen-address: %w", err))
		}
		listeners = append(listeners, l)
		servers = append(servers, s.grpcServer(opts...))
		slog.Info("serving the Hubble Observer and Peer APIs over TCP", "address", l.Addr().String(), "tls", !tcp.DisableTLS)
	}
	sub := s.cfg.Hub.Subscribe(followBuffer)
	go func() {
		for e := range sub.C {
			s.add(e)
		}
	}()
	for i, gs := range servers {
		go func() { _ = gs.Serve(listeners[i]) }()
	}
	go func() {
		<-ctx.Done()
		for _, gs := range servers {
			gs.Stop()
		}
		sub.Close()
		if socket != "" {
			_ = os.Remove(socket)
		}
	}()
	if socket != "" {
		slog.Info("serving the Hubble Observer API", "socket", socket)
	}
	return nil
}

// grpcServer serves the Observer, the Peer service and health.
func (s *Server) grpcServer(opts ...grpc.ServerOption) *grpc.Server {
	gs := grpc.NewServer(opts...)
	observerpb.RegisterObserverServer(gs, s)
	if s.cfg.Peers != nil {
		peerpb.RegisterPeerServer(gs, s.cfg.Peers)
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("hubble.server.Observer", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	return gs
}

// listenUnix listens on socket, only root may connect.
func listenUnix(socket string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return nil, fmt.Errorf("hubble socket: %w", err)
	}
	_ = os.Remove(socket) // a previous agent's
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("hubble socket: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("hubble socket: %w", err)
	}
	return l, nil
}

// add keeps f and hands it to every follower with room for it.
func (s *Server) add(f events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) < s.cfg.Capacity {
		s.ring = append(s.ring, f)
	} else {
		s.ring[s.next] = f
		s.next = (s.next + 1) % s.cfg.Capacity
	}
	s.seen++
	for fw := range s.followers {
		select {
		case fw.c <- f:
		default:
			fw.lost++
			s.clientLost++
		}
	}
}

// recent returns the kept events, oldest first.
func (s *Server) recent() []events.Event {
	out := make([]events.Event, 0, len(s.ring))
	out = append(out, s.ring[s.next:]...)
	return append(out, s.ring[:s.next]...)
}

// GetFlows sends the kept flows the request asks for (the last or first
// number of those its filters match, or those since a time) and, with
// follow, every new one, with a LostEvent when flows were lost on the
// way (the datapath's ring buffer full, or this client too slow).
func (s *Server) GetFlows(req *observerpb.GetFlowsRequest, stream grpc.ServerStreamingServer[observerpb.GetFlowsResponse]) error {
	white, err := compile(req.GetWhitelist())
	if err != nil {
		return status.Error(codes.InvalidArgument, "whitelist "+err.Error())
	}
	black, err := compile(req.GetBlacklist())
	if err != nil {
		return status.Error(codes.InvalidArgument, "blacklist "+err.Error())
	}
	since, until := req.GetSince(), req.GetUntil()
	match := func(f *flowpb.Flow) bool {
		if since != nil && f.GetTime().AsTime().Before(since.AsTime()) {
			return false
		}
		if until != nil && f.GetTime().AsTime().After(until.AsTime()) {
			return false
		}
		return (len(white) == 0 || white.any(f)) && !black.any(f)
	}
	var fw *follower
	s.mu.Lock()
	history := s.recent()
	if req.GetFollow() {
		fw = &follower{c: make(chan events.Event, followBuffer)}
		s.followers[fw] = struct{}{}
	}
	s.mu.Unlock()
	if fw != nil {
		defer func() {
			s.mu.Lock()
			delete(s.followers, fw)
			s.mu.Unlock()
		}()
	}
	var matched []*flowpb.Flow
	for _, e := range history {
		if f := toFlow(e, s.cfg.Node, s.cfg.Names); match(f) {
			matched = append(matched, f)
		}
	}
	switch n := int(req.GetNumber()); {
	case n > 0 && req.GetFirst() && len(matched) > n:
		matched = matched[:n]
	case n > 0 && len(matched) > n:
		matched = matched[len(matched)-n:]
	case n == 0 && req.GetFollow() && since == nil:
		matched = nil // only what comes
	}
	for _, f := range matched {
		if err := s.send(stream, f); err != nil {
			return err
		}
	}
	if fw == nil {
		return nil
	}
	var toldDatapath uint64
	if s.cfg.DatapathLost != nil {
		toldDatapath = s.cfg.DatapathLost()
	}
	var toldClient uint64
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case e := <-fw.c:
			if f := toFlow(e, s.cfg.Node, s.cfg.Names); match(f) {
				if err := s.send(stream, f); err != nil {
					return err
				}
			}
		case <-tick.C:
			if until != nil && time.Now().After(until.AsTime()) {
				return nil
			}
			s.mu.Lock()
			lost := fw.lost
			s.mu.Unlock()
			if lost != toldClient {
				if err := s.sendLost(stream, flowpb.LostEventSource_OBSERVER_EVENTS_QUEUE, lost-toldClient); err != nil {
					return err
				}
				toldClient = lost
			}
			if s.cfg.DatapathLost != nil {
				if n := s.cfg.DatapathLost(); n != toldDatapath {
					if err := s.sendLost(stream, flowpb.LostEventSource_PERF_EVENT_RING_BUFFER, n-toldDatapath); err != nil {
						return err
					}
					toldDatapath = n
				}
			}
		}
	}
}

func (s *Server) send(stream grpc.ServerStreamingServer[observerpb.GetFlowsResponse], f *flowpb.Flow) error {
	return stream.Send(&observerpb.GetFlowsResponse{
		ResponseTypes: &observerpb.GetFlowsResponse_Flow{Flow: f}, NodeName: s.cfg.Node, Time: f.GetTime(),
	})
}

func (s *Server) sendLost(stream grpc.ServerStreamingServer[observerpb.GetFlowsResponse], src flowpb.LostEventSource, n uint64) error {
	return stream.Send(&observerpb.GetFlowsResponse{
		ResponseTypes: &observerpb.GetFlowsResponse_LostEvents{LostEvents: &flowpb.LostEvent{Source: src, NumEventsLost: n}},
		NodeName:      s.cfg.Node,
	})
}

// ServerStatus says how many flows are kept and were seen; one node,
// this one, is connected.
func (s *Server) ServerStatus(context.Context, *observerpb.ServerStatusRequest) (*observerpb.ServerStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &observerpb.ServerStatusResponse{
		NumFlows: uint64(len(s.ring)), MaxFlows: uint64(s.cfg.Capacity), SeenFlows: s.seen,
		UptimeNs: uint64(time.Since(s.started)), Version: s.cfg.Version,
		NumConnectedNodes: wrapperspb.UInt32(1), NumUnavailableNodes: wrapperspb.UInt32(0),
		ClientLostEvents: s.clientLost,
	}
	if s.cfg.DatapathLost != nil {
		r.DatapathLostEvents = s.cfg.DatapathLost()
	}
	return r, nil
}

// GetNodes lists this node.
func (s *Server) GetNodes(context.Context, *observerpb.GetNodesRequest) (*observerpb.GetNodesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &observerpb.GetNodesResponse{Nodes: []*observerpb.Node{{
		Name: s.cfg.Node, Version: s.cfg.Version, State: observerpb.NodeState_NODE_CONNECTED,
		UptimeNs: uint64(time.Since(s.started)), NumFlows: uint64(len(s.ring)), MaxFlows: uint64(s.cfg.Capacity), SeenFlows: s.seen,
	}}}, nil
}
