package policy

import (
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// sweep deletes from the maps every key that t does not hold: what an
// earlier agent pinned and this one's first compilation no longer gives
// (a pod deleted while no agent ran; an endpoint, rule set or identity
// number now handed out otherwise). Without it, an address or a number
// given again would be judged by rules meant for another pod. It runs
// after the first pass's writes, in SyncChanges' order (endpoints, then
// entries, then identities), so no endpoint is left without its rules.
func sweep(m *cube.Maps, t *Tables) (removed int, err error) {
	endpoints := map[datapath.Addr]struct{}{}
	for a := range t.Endpoints {
		endpoints[datapath.AddrFrom(a)] = struct{}{}
	}
	rules := make(map[datapath.PolicyEntryKey]struct{}, len(t.Entries))
	entries := map[datapath.PolicyEntryKey]struct{}{} // an earlier agent's single ports are not kept here
	for e := range t.allEntries() {
		if e.exact() {
			rules[entryKey(e)] = struct{}{}
		} else {
			entries[entryKey(e)] = struct{}{}
		}
	}
	hosts := make(map[datapath.Addr]struct{}, len(t.Peers))
	peers := map[datapath.Prefix]struct{}{} // an earlier agent's single addresses are not kept here
	for p := range t.Peers {
		if p.IsSingleIP() {
			hosts[datapath.AddrFrom(p.Addr())] = struct{}{}
		} else {
			peers[datapath.PrefixFrom(p)] = struct{}{}
		}
	}
	n, err := sweepMap[datapath.Addr, datapath.PolicyEndpoint](m, MapEndpoints, endpoints)
	removed += n
	if err != nil {
		return removed, err
	}
	for name, keep := range map[string]map[datapath.PolicyEntryKey]struct{}{MapRules: rules, MapEntries: entries} {
		n, err = sweepMap[datapath.PolicyEntryKey, datapath.PolicyEntry](m, name, keep)
		removed += n
		if err != nil {
			return removed, err
		}
	}
	n, err = sweepMap[datapath.Prefix, datapath.PolicyPeer](m, MapPeers, peers)
	removed += n
	if err != nil {
		return removed, err
	}
	n, err = sweepMap[datapath.Addr, datapath.PolicyPeer](m, MapHosts, hosts)
	return removed + n, err
}

// pinnedNumbers are the largest endpoint, rule set and identity numbers
// the maps hold (an earlier agent's).
func pinnedNumbers(m *cube.Maps) (endpoint, ruleSet uint32, identity Identity, err error) {
	err = cube.Each(m, MapEndpoints, func(_ datapath.Addr, v datapath.PolicyEndpoint) bool {
		endpoint, ruleSet = max(endpoint, v.Id), max(ruleSet, v.RuleSet)
		return true
	})
	if err != nil {
		return
	}
	for _, name := range []string{MapRules, MapEntries} {
		err = cube.Each(m, name, func(k datapath.PolicyEntryKey, _ datapath.PolicyEntry) bool {
			ruleSet, identity = max(ruleSet, k.RuleSet), max(identity, Identity(k.Peer))
			return true
		})
		if err != nil {
			return
		}
	}
	err = cube.Each(m, MapPeers, func(_ datapath.Prefix, v datapath.PolicyPeer) bool {
		identity = max(identity, Identity(v.Identity))
		return true
	})
	if err != nil {
		return
	}
	err = cube.Each(m, MapHosts, func(_ datapath.Addr, v datapath.PolicyPeer) bool {
		identity = max(identity, Identity(v.Identity))
		return true
	})
	return
}

// sweepMap deletes the keys of the named map that keep does not hold.
func sweepMap[K comparable, V any](m *cube.Maps, name string, keep map[K]struct{}) (int, error) {
	var stale []K
	if err := cube.Each(m, name, func(k K, _ V) bool {
		if _, ok := keep[k]; !ok {
			stale = append(stale, k)
		}
		return true
	}); err != nil {
		return 0, err
	}
	if len(stale) == 0 {
		return 0, nil
	}
	return cube.RemoveBatch(m, name, stale)
}
