package bgp

import (
	"context"
	"fmt"
	"sync"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"github.com/sirupsen/logrus"
)

// Ops counts what one Apply asked of GoBGP; all zero: nothing changed.
type Ops struct {
	GlobalRestarts int
	PeersAdded     int
	PeersUpdated   int
	PeersDeleted   int
	PathsAdded     int
	PathsWithdrawn int
}

// Total is the number of operations.
func (o Ops) Total() int {
	return o.GlobalRestarts + o.PeersAdded + o.PeersUpdated + o.PeersDeleted + o.PathsAdded + o.PathsWithdrawn
}

// Speaker is a BGP speaker converged by Apply. Its methods are safe for
// concurrent use.
type Speaker struct {
	log logrus.FieldLogger

	mu     sync.Mutex
	server *server.BgpServer // nil until the first Apply
	state  applied
	last   Ops
}

// New returns a speaker that does nothing until the first Apply.
func New(logger logrus.FieldLogger) *Speaker {
	if logger == nil {
		logger = logrus.StandardLogger()
	}
	return &Speaker{log: logger.WithField("subsys", "bgp"), state: newApplied()}
}

// LastApply says what the last Apply did.
func (s *Speaker) LastApply() Ops {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Apply makes the speaker run exactly cfg and announce exactly routes. Input
// that does not validate is refused before anything changes. Otherwise only
// the difference to the last Apply is made: the global config is restarted
// only when the ASN, router id or listening setup changes (which resets
// every session), a peer whose settings change is deleted and added again
// (its session resets), a route whose attributes change is re-announced
// (which replaces it at the router without a withdrawal). On an error the
// speaker keeps track of what did get done, and a later Apply finishes the
// job.
func (s *Speaker) Apply(ctx context.Context, cfg Config, routes []Route) error {
	cfg, routes, err := normalize(cfg, routes)
	if err != nil {
		return fmt.Errorf("bgp: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := diff(s.state, cfg, routes)
	s.last = Ops{}
	if p.empty() {
		return nil
	}
	return s.execute(ctx, cfg, p)
}

func (s *Speaker) execute(ctx context.Context, cfg Config, p plan) error {
	if p.restartGlobal {
		if err := s.restartGlobal(ctx, cfg); err != nil {
			return err
		}
	}
	for _, pr := range p.deletePeers {
		if err := s.server.DeletePeer(ctx, &api.DeletePeerRequest{Address: pr.Address.String()}); err != nil {
			return fmt.Errorf("bgp: deleting peer %s: %w", pr.Address, err)
		}
		delete(s.state.peers, pr.Address.String())
		s.last.PeersDeleted++
	}
	for _, pr := range p.updatePeers {
		// Delete and add rather than GoBGP's UpdatePeer: that one takes
		// some changes only after a session reset and some (the MD5 key
		// of the socket, the families) not at all; a changed peer is a
		// new session anyway.
		if err := s.server.DeletePeer(ctx, &api.DeletePeerRequest{Address: pr.Address.String()}); err != nil {
			return fmt.Errorf("bgp: updating peer %s: %w", pr.Address, err)
		}
		delete(s.state.peers, pr.Address.String())
		if err := s.server.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(pr)}); err != nil {
			return fmt.Errorf("bgp: updating peer %s: %w", pr.Address, err)
		}
		s.state.peers[pr.Address.String()] = pr
		s.last.PeersUpdated++
	}
	for _, pr := range p.addPeers {
		if err := s.server.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(pr)}); err != nil {
			return fmt.Errorf("bgp: adding peer %s: %w", pr.Address, err)
		}
		s.state.peers[pr.Address.String()] = pr
		s.last.PeersAdded++
	}
	for _, r := range p.withdraw {
		if err := s.withdraw(ctx, r); err != nil {
			return err
		}
		s.last.PathsWithdrawn++
	}
	for _, r := range p.addRoutes {
		path, err := apiPath(r)
		if err != nil {
			return fmt.Errorf("bgp: %w", err)
		}
		resp, err := s.server.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path})
		if err != nil {
			return fmt.Errorf("bgp: announcing %s: %w", r.Prefix, err)
		}
		k := r.Prefix.String()
		s.state.routes[k] = r
		s.state.uuids[k] = resp.Uuid
		s.last.PathsAdded++
	}
	return nil
}

func (s *Speaker) withdraw(ctx context.Context, r Route) error {
	k := r.Prefix.String()
	if err := s.server.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Uuid: s.state.uuids[k]}); err != nil {
		return fmt.Errorf("bgp: withdrawing %s: %w", r.Prefix, err)
	}
	delete(s.state.routes, k)
	delete(s.state.uuids, k)
	return nil
}

// restartGlobal (re)starts GoBGP with cfg's global part and no peers or
// paths, importing nothing.
func (s *Speaker) restartGlobal(ctx context.Context, cfg Config) error {
	if s.server == nil {
		s.server = server.NewBgpServer(server.LoggerOption(newGoBGPLogger(s.log)))
		// Serve is GoBGP's event loop; it has no way to end, and lives
		// as long as the process (one goroutine, idle when stopped).
		go s.server.Serve()
	}
	if s.state.started {
		// Sends every peer a Cease: a new ASN or router id is a new
		// speaker to the routers.
		if err := s.server.StopBgp(ctx, &api.StopBgpRequest{}); err != nil {
			return fmt.Errorf("bgp: stopping for the new global config: %w", err)
		}
		s.state = newApplied()
	}
	if err := s.server.StartBgp(ctx, &api.StartBgpRequest{Global: apiGlobal(cfg)}); err != nil {
		return fmt.Errorf("bgp: starting: %w", err)
	}
	s.state.started = true
	s.last.GlobalRestarts++
	if err := s.rejectImports(ctx); err != nil {
		// Without the policy the speaker would import: not started.
		_ = s.server.StopBgp(ctx, &api.StopBgpRequest{})
		s.state = newApplied()
		return fmt.Errorf("bgp: setting the import policy: %w", err)
	}
	s.state.global = globalOf(cfg)
	return nil
}

// importPolicy is the one policy the speaker defines.
const importPolicy = "netcube-local-only"

// rejectImports makes GoBGP's global import policy reject every path but
// the speaker's own: nothing a peer sends gets into the global RIB, so
// nothing is ever selected, re-advertised or (were zebra on) installed.
// GoBGP applies the global import policy to locally added paths too, so a
// plain default-reject would drop our announcements with the rest: the
// policy accepts route type "local" and rejects by default. StartBgp
// resets the policies, so this runs after every start, before any peer
// exists.
func (s *Speaker) rejectImports(ctx context.Context) error {
	err := s.server.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{
		Name: importPolicy,
		Statements: []*api.Statement{{
			Name:       importPolicy + "-accept-local",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ACCEPT},
		}},
	}})
	if err != nil {
		return err
	}
	return s.server.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_IMPORT,
		Policies:      []*api.Policy{{Name: importPolicy}},
		DefaultAction: api.RouteAction_REJECT,
	}})
}
