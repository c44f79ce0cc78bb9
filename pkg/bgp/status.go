package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v3/api"
)

// PeerStatus is one session as GoBGP sees it.
type PeerStatus struct {
	Address netip.Addr
	ASN     uint32
	// State is idle, connect, active, opensent, openconfirm or
	// established.
	State string
	// Uptime is how long the session has been established (0 if not).
	Uptime time.Duration
	// Advertised is the number of prefixes sent to the peer; Received
	// the number it sent us, and Accepted how many of those passed the
	// import policy, which is always 0: the speaker imports nothing.
	Advertised uint64
	Received   uint64
	Accepted   uint64
}

// Peers lists the configured peers, by address.
func (s *Speaker) Peers(ctx context.Context) ([]PeerStatus, error) {
	s.mu.Lock()
	srv, started := s.server, s.state.started
	s.mu.Unlock()
	if !started {
		return nil, nil
	}
	var out []PeerStatus
	err := srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		st := PeerStatus{}
		if p.State != nil {
			st.Address, _ = netip.ParseAddr(p.State.NeighborAddress)
			st.ASN = p.State.PeerAsn
			st.State = sessionState(p.State.SessionState)
		}
		if !st.Address.IsValid() && p.Conf != nil {
			st.Address, _ = netip.ParseAddr(p.Conf.NeighborAddress)
		}
		if st.State == "established" && p.Timers != nil && p.Timers.State != nil && p.Timers.State.Uptime != nil {
			st.Uptime = time.Since(p.Timers.State.Uptime.AsTime())
		}
		for _, as := range p.AfiSafis {
			if as.State != nil {
				st.Advertised += as.State.Advertised
				st.Received += as.State.Received
				st.Accepted += as.State.Accepted
			}
		}
		out = append(out, st)
	})
	if err != nil {
		return nil, fmt.Errorf("bgp: listing peers: %w", err)
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return a.Address.Compare(b.Address) })
	return out, nil
}

func sessionState(s api.PeerState_SessionState) string {
	if s == api.PeerState_UNKNOWN {
		return "idle"
	}
	return strings.ToLower(s.String())
}
