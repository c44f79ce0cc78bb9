package bgp

import (
	"fmt"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
)

func apiGlobal(c Config) *api.Global {
	g := &api.Global{
		Asn:        c.LocalASN,
		RouterId:   c.RouterID.String(),
		ListenPort: c.ListenPort,
	}
	for _, a := range c.ListenAddresses {
		g.ListenAddresses = append(g.ListenAddresses, a.String())
	}
	return g
}

func apiFamily(f Family) *api.Family {
	if f == IPv6Unicast {
		return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	}
	return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
}

func secs(d time.Duration) uint64 { return uint64(d / time.Second) }

func apiPeer(p Peer) *api.Peer {
	ap := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.ASN,
			AuthPassword:    p.Password,
		},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:          secs(p.HoldTime),
			KeepaliveInterval: secs(p.KeepaliveInterval),
			ConnectRetry:      secs(p.ConnectRetry),
		}},
	}
	if p.EBGPMultihopTTL > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.EBGPMultihopTTL)}
	}
	if p.GracefulRestart.Enabled {
		ap.GracefulRestart = &api.GracefulRestart{
			Enabled:     true,
			RestartTime: uint32(p.GracefulRestart.RestartTime / time.Second),
			// Every start of a speaker is taken for a restart (the R bit
			// of the capability, RFC 4724 3): after an agent restart
			// the router holds our routes as stale and waits for our
			// End-of-RIB; on a first start it holds nothing, and the
			// bit costs nothing. GoBGP then also defers its own
			// updates until every established GR-capable peer has
			// sent its End-of-RIB (BIRD sends it at once), or its
			// deferral time (360 s) runs out.
			LocalRestarting: true,
		}
	}
	for _, f := range p.Families {
		as := &api.AfiSafi{Config: &api.AfiSafiConfig{Family: apiFamily(f), Enabled: true}}
		if p.GracefulRestart.Enabled {
			as.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
		ap.AfiSafis = append(ap.AfiSafis, as)
	}
	return ap
}

// apiPath is r as a locally originated GoBGP path. An unset next hop is
// sent as 0.0.0.0 or ::, which GoBGP replaces with the session's local
// address when it sends the path.
func apiPath(r Route) (*api.Path, error) {
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	bits := uint8(r.Prefix.Bits())
	var nlri bgp.AddrPrefixInterface
	if r.Prefix.Addr().Is4() {
		nh := "0.0.0.0"
		if r.NextHop.IsValid() {
			nh = r.NextHop.String()
		}
		nlri = bgp.NewIPAddrPrefix(bits, r.Prefix.Addr().String())
		attrs = append(attrs, bgp.NewPathAttributeNextHop(nh))
	} else {
		nh := "::"
		if r.NextHop.IsValid() {
			nh = r.NextHop.String()
		}
		nlri = bgp.NewIPv6AddrPrefix(bits, r.Prefix.Addr().String())
		attrs = append(attrs, bgp.NewPathAttributeMpReachNLRI(nh, []bgp.AddrPrefixInterface{nlri}))
	}
	if len(r.Communities) > 0 {
		vals := make([]uint32, 0, len(r.Communities))
		for _, c := range r.Communities {
			v, err := parseCommunity(c)
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
		}
		attrs = append(attrs, bgp.NewPathAttributeCommunities(vals))
	}
	if r.LocalPref > 0 {
		attrs = append(attrs, bgp.NewPathAttributeLocalPref(r.LocalPref))
	}
	p, err := apiutil.NewPath(nlri, false, attrs, time.Now())
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", r.Prefix, err)
	}
	return p, nil
}
