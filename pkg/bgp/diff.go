package bgp

import (
	"reflect"
	"slices"
)

// applied is what the GoBGP server holds, as far as the speaker knows: it
// is updated after each call that succeeded, so that after a failed Apply
// the next one diffs against the truth and converges.
type applied struct {
	started bool
	global  Config // LocalASN, RouterID and the listening fields only
	peers   map[string]Peer
	routes  map[string]Route
	uuids   map[string][]byte // GoBGP's handle of each route's path
}

func newApplied() applied {
	return applied{peers: map[string]Peer{}, routes: map[string]Route{}, uuids: map[string][]byte{}}
}

// plan is what it takes to go from what was applied to what is asked for.
// Both sides are normalized, so that comparing them compares meanings.
type plan struct {
	// restartGlobal: the global config changes (ASN, router id or the
	// listening setup), which GoBGP takes only by stopping and starting
	// again; every peer and route is then added anew.
	restartGlobal bool
	addPeers      []Peer
	updatePeers   []Peer
	deletePeers   []Peer
	addRoutes     []Route // new, or with changed attributes: a re-add replaces
	withdraw      []Route
}

func (p plan) empty() bool {
	return !p.restartGlobal && len(p.addPeers)+len(p.updatePeers)+len(p.deletePeers)+len(p.addRoutes)+len(p.withdraw) == 0
}

func globalOf(c Config) Config {
	return Config{LocalASN: c.LocalASN, RouterID: c.RouterID, ListenPort: c.ListenPort, ListenAddresses: c.ListenAddresses}
}

func diff(old applied, cfg Config, routes []Route) plan {
	var p plan
	if !old.started || !reflect.DeepEqual(old.global, globalOf(cfg)) {
		p.restartGlobal = true
		p.addPeers = slices.Clone(cfg.Peers)
		p.addRoutes = slices.Clone(routes)
		return p
	}
	now := map[string]bool{}
	for _, pr := range cfg.Peers {
		k := pr.Address.String()
		now[k] = true
		prev, ok := old.peers[k]
		switch {
		case !ok:
			p.addPeers = append(p.addPeers, pr)
		case !reflect.DeepEqual(prev, pr):
			p.updatePeers = append(p.updatePeers, pr)
		}
	}
	for k, pr := range old.peers {
		if !now[k] {
			p.deletePeers = append(p.deletePeers, pr)
		}
	}
	want := map[string]bool{}
	for _, r := range routes {
		k := r.Prefix.String()
		want[k] = true
		if prev, ok := old.routes[k]; !ok || !reflect.DeepEqual(prev, r) {
			p.addRoutes = append(p.addRoutes, r)
		}
	}
	for k, r := range old.routes {
		if !want[k] {
			p.withdraw = append(p.withdraw, r)
		}
	}
	// Map order is random; a stable order makes tests and logs readable.
	slices.SortFunc(p.deletePeers, func(a, b Peer) int { return a.Address.Compare(b.Address) })
	slices.SortFunc(p.withdraw, func(a, b Route) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.Prefix.Bits() - b.Prefix.Bits()
	})
	return p
}
