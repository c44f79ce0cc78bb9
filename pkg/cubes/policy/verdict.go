package policy

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }

// PeerOf is the identity of addr: the longest prefix of the identity cache
// holding it, else World.
func (t *Tables) PeerOf(addr netip.Addr) Identity {
	for bits := addr.BitLen(); bits >= 0; bits-- {
		p, _ := addr.Prefix(bits)
		if id, ok := t.Peers[p]; ok {
			return id
		}
	}
	return World
}

// allows looks a rule set's traffic up as the datapath does: with the
// peer's identity and with AnyPeer, each with the protocol and with every
// protocol, each by the longest port prefix.
func (t *Tables) allows(rs uint32, dir Direction, peer Identity, proto model.Proto, port uint16) bool {
	for _, id := range []Identity{peer, AnyPeer} {
		for _, pr := range []model.Proto{proto, 0} {
			for bits := 16; bits >= 0; bits-- {
				masked := uint16(0)
				if bits > 0 {
					masked = port &^ (1<<(16-bits) - 1)
				}
				if pr == 0 && bits > 0 {
					continue // every-protocol entries cover every port
				}
				if allow, ok := t.verdict(Entry{RuleSet: rs, Dir: dir, Proto: pr, Peer: id, Port: masked, PortBits: uint8(bits)}); ok {
					return allow
				}
			}
		}
	}
	return false
}

// Allows says whether a new connection from src to dst:port is allowed by
// the tables of a node holding the endpoints involved: the sender's egress
// and the receiver's ingress, each checked only when a policy isolates it.
// A pod reaching itself never leaves its network namespace: allowed.
func (t *Tables) Allows(src, dst netip.Addr, proto model.Proto, port uint16) bool {
	if src == dst {
		return true
	}
	if ep, ok := t.Endpoints[src]; ok && ep.IsolatedEgress {
		if !t.allows(ep.RuleSet, Egress, t.PeerOf(dst), proto, port) {
			return false
		}
	}
	if ep, ok := t.Endpoints[dst]; ok && ep.IsolatedIngress {
		peer := t.PeerOf(src)
		if peer != Host && !t.allows(ep.RuleSet, Ingress, peer, proto, port) {
			return false
		}
	}
	return true
}

// MapsAllow answers Allows from the maps the datapath reads (m: the
// kernel's, pinned by an agent), with its lookups: the endpoints by
// address, the peer's identity by its address or else by longest prefix, the entries exactly or else by longest
// port prefix. It tells what is enforced, not what was compiled (the
// benchmark times an API write to it).
func MapsAllow(m *cube.Maps, src, dst netip.Addr, proto model.Proto, port uint16) (bool, error) {
	if src == dst {
		return true, nil
	}
	peerOf := func(a netip.Addr) (Identity, error) {
		v, ok, err := cube.Get[datapath.Addr, datapath.PolicyPeer](m, MapHosts, datapath.AddrFrom(a))
		if err == nil && !ok {
			v, ok, err = cube.Get[datapath.Prefix, datapath.PolicyPeer](m, MapPeers, datapath.PrefixFrom(netip.PrefixFrom(a, a.BitLen())))
		}
		if err != nil || !ok {
			return World, err
		}
		return Identity(v.Identity), nil
	}
	allows := func(rs uint32, dir Direction, peer Identity) (bool, error) {
		for _, id := range []Identity{peer, AnyPeer} {
			for _, pr := range []model.Proto{proto, 0} {
				k := entryKey(Entry{RuleSet: rs, Dir: dir, Proto: pr, Peer: id, Port: port, PortBits: 16})
				v, ok, err := cube.Get[datapath.PolicyEntryKey, datapath.PolicyEntry](m, MapRules, k)
				if err == nil && !ok && pr != 0 {
					v, ok, err = cube.Get[datapath.PolicyEntryKey, datapath.PolicyEntry](m, MapEntries, k)
				}
				if err != nil || ok {
					return ok && v.Allow != 0, err // the first entry found decides (a tier set's may deny)
				}
			}
		}
		return false, nil
	}
	endpoint := func(a netip.Addr) (datapath.PolicyEndpoint, bool, error) {
		return cube.Get[datapath.Addr, datapath.PolicyEndpoint](m, MapEndpoints, datapath.AddrFrom(a))
	}
	if ep, ok, err := endpoint(src); err != nil {
		return false, err
	} else if ok && ep.Flags&datapath.IsolatedEgress != 0 {
		peer, err := peerOf(dst)
		if err != nil {
			return false, err
		}
		if ok, err := allows(ep.RuleSet, Egress, peer); err != nil || !ok {
			return false, err
		}
	}
	if ep, ok, err := endpoint(dst); err != nil {
		return false, err
	} else if ok && ep.Flags&datapath.IsolatedIngress != 0 {
		peer, err := peerOf(src)
		if err != nil {
			return false, err
		}
		if peer != Host {
			return allows(ep.RuleSet, Ingress, peer)
		}
	}
	return true, nil
}
