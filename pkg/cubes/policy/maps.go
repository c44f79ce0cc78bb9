package policy

import (
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// The policy cube's maps (bpf/cubes/policy/policy_maps.h).
const (
	MapPeers     = "pol_peers"     // the identity cache
	MapEndpoints = "pol_endpoints" // this node's pods some policy selects
	MapEntries   = "pol_entries"   // what each may send and receive
	MapFlows     = "pol_flows"     // connections allowed (the datapath's)
	MapDrops     = "pol_drops"     // drops per endpoint and reason (the datapath's)
)

// Sync writes want into the maps, which hold have (nil: nothing): only
// what differs. New entries and identities go in before the endpoints that
// use them, and stale ones leave after, so a pod is never judged by a half
// written policy: during a change it has the union of the old rules and
// the new. A failed write returns at once; calling Sync again with the
// same have converges (every write is idempotent).
func Sync(m *cube.Maps, have, want *Tables) error {
	if have == nil {
		have = &Tables{}
	}
	for p, id := range want.Peers {
		if old, ok := have.Peers[p]; !ok || old != id {
			if err := cube.Put(m, MapPeers, datapath.PrefixFrom(p), datapath.PolicyPeer{Identity: datapath.Identity(id)}); err != nil {
				return err
			}
		}
	}
	for e := range want.Entries {
		if _, ok := have.Entries[e]; !ok {
			if err := cube.Put(m, MapEntries, entryKey(e), datapath.PolicyEntry{Allow: 1}); err != nil {
				return err
			}
		}
	}
	for a, ep := range want.Endpoints {
		if old, ok := have.Endpoints[a]; !ok || old != ep {
			if err := cube.Put(m, MapEndpoints, datapath.AddrFrom(a), endpointValue(ep)); err != nil {
				return err
			}
		}
	}
	for a := range have.Endpoints {
		if _, ok := want.Endpoints[a]; !ok {
			if err := cube.Remove(m, MapEndpoints, datapath.AddrFrom(a)); err != nil {
				return err
			}
		}
	}
	for e := range have.Entries {
		if _, ok := want.Entries[e]; !ok {
			if err := cube.Remove(m, MapEntries, entryKey(e)); err != nil {
				return err
			}
		}
	}
	for p := range have.Peers {
		if _, ok := want.Peers[p]; !ok {
			if err := cube.Remove(m, MapPeers, datapath.PrefixFrom(p)); err != nil {
				return err
			}
		}
	}
	return nil
}

func entryKey(e Entry) datapath.PolicyEntryKey {
	port := e.Port
	if e.PortBits < 16 {
		port &^= 1<<(16-e.PortBits) - 1
	}
	return datapath.PolicyEntryKey{
		Prefixlen: datapath.PolicyEntryBits + datapath.EntryBits(e.PortBits),
		Endpoint:  e.Endpoint,
		Dir:       datapath.PolicyDir(e.Dir),
		Proto:     uint8(e.Proto),
		Peer:      datapath.Identity(e.Peer),
		Port:      datapath.Port(port),
	}
}

func endpointValue(ep Endpoint) datapath.PolicyEndpoint {
	v := datapath.PolicyEndpoint{Id: ep.ID}
	if ep.IsolatedIngress {
		v.Flags |= datapath.IsolatedIngress
	}
	if ep.IsolatedEgress {
		v.Flags |= datapath.IsolatedEgress
	}
	return v
}
