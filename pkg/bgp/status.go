package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
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
	// Advertised is the number of prefixes sent to the peer (its
	// adj-rib-out; 0 while the session is not established: GoBGP
	// computes that table from the RIB whatever the session's state,
	// and a down session has sent nothing that stands), Received the number it sent us (its adj-rib-in), and
	// Accepted how many of those are in the speaker's RIB: always 0, the
	// speaker imports nothing. (GoBGP's own per-family counters are not
	// used: its "accepted" ignores the global import policy.)
	Advertised uint64
	Received   uint64
	Accepted   uint64
	// Flaps is GoBGP's flop count: how many times the session went down
	// less than 30 s after it came up (a session that ends after a
	// longer uptime is not counted). GoBGP keeps no last error to show.
	Flaps uint32
}

// Peers lists the configured peers, by address.
func (s *Speaker) Peers(ctx context.Context) ([]PeerStatus, error) {
	s.mu.Lock()
	srv, started := s.server, s.state.started
	fams := map[string][]Family{}
	for k, p := range s.state.peers {
		fams[k] = p.Families
	}
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
			st.Flaps = p.State.Flops
		}
		if !st.Address.IsValid() && p.Conf != nil {
			st.Address, _ = netip.ParseAddr(p.Conf.NeighborAddress)
		}
		if st.State == "established" && p.Timers != nil && p.Timers.State != nil && p.Timers.State.Uptime != nil {
			st.Uptime = time.Since(p.Timers.State.Uptime.AsTime())
		}
		out = append(out, st)
	})
	if err != nil {
		return nil, fmt.Errorf("bgp: listing peers: %w", err)
	}
	for i := range out {
		if err := s.countPrefixes(ctx, srv, fams[out[i].Address.String()], &out[i]); err != nil {
			return nil, err
		}
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

// countPrefixes fills st's prefix counts from GoBGP's tables.
func (s *Speaker) countPrefixes(ctx context.Context, srv *server.BgpServer, fams []Family, st *PeerStatus) error {
	addr := st.Address.String()
	for _, f := range fams {
		count := func(tt api.TableType, name string, match func(*api.Path) bool) (uint64, error) {
			var n uint64
			err := srv.ListPath(ctx, &api.ListPathRequest{TableType: tt, Name: name, Family: apiFamily(f)}, func(d *api.Destination) {
				for _, p := range d.Paths {
					if match(p) {
						n++
					}
				}
			})
			if err != nil {
				return 0, fmt.Errorf("bgp: listing %s paths of %s: %w", tt, addr, err)
			}
			return n, nil
		}
		all := func(*api.Path) bool { return true }
		var out uint64
		if st.State == "established" {
			var err error
			if out, err = count(api.TableType_ADJ_OUT, addr, all); err != nil {
				return err
			}
		}
		in, err := count(api.TableType_ADJ_IN, addr, all)
		if err != nil {
			return err
		}
		acc, err := count(api.TableType_GLOBAL, "", func(p *api.Path) bool { return p.NeighborIp == addr })
		if err != nil {
			return err
		}
		st.Advertised += out
		st.Received += in
		st.Accepted += acc
	}
	return nil
}
