package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/osrg/gobgp/v3/pkg/packet/bgp"
)

// normalize checks cfg and routes and returns them with every default made
// explicit, so that two inputs meaning the same thing compare equal in the
// diff. An error names the field that is wrong.
func normalize(cfg Config, routes []Route) (Config, []Route, error) {
	if cfg.LocalASN == 0 {
		return Config{}, nil, fmt.Errorf("localASN: 0 is not a valid ASN")
	}
	if !cfg.RouterID.IsValid() {
		return Config{}, nil, fmt.Errorf("routerID: missing")
	}
	if !cfg.RouterID.Is4() {
		return Config{}, nil, fmt.Errorf("routerID: %s is not an IPv4 address", cfg.RouterID)
	}
	out := Config{LocalASN: cfg.LocalASN, RouterID: cfg.RouterID, ListenPort: cfg.ListenPort}
	switch {
	case cfg.ListenPort == 0 || cfg.ListenPort == DoNotListen:
		out.ListenPort = DoNotListen
		if len(cfg.ListenAddresses) > 0 {
			return Config{}, nil, fmt.Errorf("listenAddresses: given, but listenPort says not to listen")
		}
	case cfg.ListenPort < 0 || cfg.ListenPort > 65535:
		return Config{}, nil, fmt.Errorf("listenPort: %d is not a port (or -1: do not listen)", cfg.ListenPort)
	}
	for i, a := range cfg.ListenAddresses {
		if !a.IsValid() {
			return Config{}, nil, fmt.Errorf("listenAddresses[%d]: missing", i)
		}
		out.ListenAddresses = append(out.ListenAddresses, a.Unmap())
	}

	seen := map[string]int{}
	for i, p := range cfg.Peers {
		np, err := normalizePeer(p)
		if err != nil {
			return Config{}, nil, fmt.Errorf("peers[%d].%w", i, err)
		}
		if j, dup := seen[np.Address.String()]; dup {
			return Config{}, nil, fmt.Errorf("peers[%d].address: %s is peers[%d]'s too", i, np.Address, j)
		}
		seen[np.Address.String()] = i
		out.Peers = append(out.Peers, np)
	}

	var outRoutes []Route
	prefixes := map[string]int{}
	for i, r := range routes {
		nr, err := normalizeRoute(r, out.Peers)
		if err != nil {
			return Config{}, nil, fmt.Errorf("routes[%d].%w", i, err)
		}
		if j, dup := prefixes[nr.Prefix.String()]; dup {
			return Config{}, nil, fmt.Errorf("routes[%d].prefix: %s is routes[%d]'s too", i, nr.Prefix, j)
		}
		prefixes[nr.Prefix.String()] = i
		outRoutes = append(outRoutes, nr)
	}
	return out, outRoutes, nil
}

func normalizePeer(p Peer) (Peer, error) {
	if !p.Address.IsValid() {
		return Peer{}, fmt.Errorf("address: missing")
	}
	p.Address = p.Address.Unmap()
	if p.Address.Zone() != "" {
		return Peer{}, fmt.Errorf("address: %s: link-local peers (with a zone) are not supported", p.Address)
	}
	if p.ASN == 0 {
		return Peer{}, fmt.Errorf("asn: 0 is not a valid ASN")
	}
	if p.Port == 0 {
		p.Port = DefaultPeerPort
	}
	if err := seconds("holdTime", p.HoldTime, 0, 65535); err != nil {
		return Peer{}, err
	}
	if p.HoldTime > 0 && p.HoldTime < 3*time.Second {
		// RFC 4271 4.2: zero or at least three seconds.
		return Peer{}, fmt.Errorf("holdTime: %s is less than 3s", p.HoldTime)
	}
	if err := seconds("keepaliveInterval", p.KeepaliveInterval, 0, 65535); err != nil {
		return Peer{}, err
	}
	if p.HoldTime > 0 && p.KeepaliveInterval >= p.HoldTime {
		return Peer{}, fmt.Errorf("keepaliveInterval: %s is not less than holdTime %s", p.KeepaliveInterval, p.HoldTime)
	}
	if p.ConnectRetry == 0 {
		p.ConnectRetry = DefaultConnectRetry
	}
	if err := seconds("connectRetry", p.ConnectRetry, 1, 65535); err != nil {
		return Peer{}, err
	}
	if len(p.Password) > 80 {
		// TCP_MD5SIG_MAXKEYLEN.
		return Peer{}, fmt.Errorf("password: longer than 80 bytes")
	}
	if p.GracefulRestart.Enabled {
		if p.GracefulRestart.RestartTime == 0 {
			p.GracefulRestart.RestartTime = 120 * time.Second
		}
		if err := seconds("gracefulRestart.restartTime", p.GracefulRestart.RestartTime, 1, 4095); err != nil {
			return Peer{}, err
		}
	} else {
		p.GracefulRestart.RestartTime = 0
	}
	fams := []Family{}
	for i, f := range p.Families {
		if f != IPv4Unicast && f != IPv6Unicast {
			return Peer{}, fmt.Errorf("families[%d]: %q is not %q or %q", i, f, IPv4Unicast, IPv6Unicast)
		}
		if !slices.Contains(fams, f) {
			fams = append(fams, f)
		}
	}
	if len(fams) == 0 {
		fams = []Family{IPv4Unicast, IPv6Unicast}
	}
	slices.Sort(fams)
	p.Families = fams
	return p, nil
}

// seconds checks that d is whole seconds in [lo, hi]: BGP's timers are
// seconds on the wire, and a fraction silently dropped would surprise.
func seconds(field string, d time.Duration, lo, hi int64) error {
	if d == 0 && lo == 0 {
		return nil
	}
	if d%time.Second != 0 {
		return fmt.Errorf("%s: %s is not whole seconds", field, d)
	}
	if s := int64(d / time.Second); s < lo || s > hi {
		return fmt.Errorf("%s: %s is not within %ds..%ds", field, d, lo, hi)
	}
	return nil
}

func normalizeRoute(r Route, peers []Peer) (Route, error) {
	if !r.Prefix.IsValid() {
		return Route{}, fmt.Errorf("prefix: missing")
	}
	if r.Prefix.Addr().Is4In6() {
		return Route{}, fmt.Errorf("prefix: %s is an IPv4-mapped IPv6 prefix", r.Prefix)
	}
	if r.Prefix.Masked() != r.Prefix {
		return Route{}, fmt.Errorf("prefix: %s is not masked (%s is)", r.Prefix, r.Prefix.Masked())
	}
	if r.NextHop.IsValid() {
		r.NextHop = r.NextHop.Unmap()
		if r.NextHop.Is4() != r.Prefix.Addr().Is4() {
			return Route{}, fmt.Errorf("nextHop: %s is not of %s's family", r.NextHop, r.Prefix)
		}
		if r.NextHop.IsUnspecified() {
			r.NextHop = netip.Addr{}
		}
	}
	if !r.NextHop.IsValid() && r.Prefix.Addr().Is6() {
		for _, p := range peers {
			if p.Address.Is4() && slices.Contains(p.Families, IPv6Unicast) {
				return Route{}, fmt.Errorf("nextHop: missing, and IPv6 route %s would go over the IPv4 session to %s, which has no IPv6 address of ours to use", r.Prefix, p.Address)
			}
		}
	}
	comms := []string{}
	for i, c := range r.Communities {
		v, err := parseCommunity(c)
		if err != nil {
			return Route{}, fmt.Errorf("communities[%d]: %w", i, err)
		}
		// The canonical form, so that "no-export" and "65535:65281" are
		// one community to the diff.
		s := fmt.Sprintf("%d:%d", v>>16, v&0xffff)
		if !slices.Contains(comms, s) {
			comms = append(comms, s)
		}
	}
	slices.Sort(comms)
	r.Communities = comms
	return r, nil
}

// parseCommunity reads a standard community (RFC 1997): "ASN:value", each
// 16 bits, or a well-known name as GoBGP names them.
func parseCommunity(s string) (uint32, error) {
	if v, ok := bgp.WellKnownCommunityValueMap[strings.ToLower(s)]; ok {
		return uint32(v), nil
	}
	hi, lo, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("%q is neither ASN:value nor a well-known community name", s)
	}
	a, err1 := strconv.ParseUint(hi, 10, 16)
	b, err2 := strconv.ParseUint(lo, 10, 16)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%q: both halves must be numbers 0..65535", s)
	}
	return uint32(a)<<16 | uint32(b), nil
}
