package policy

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"

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

// allows looks an endpoint's traffic up as the datapath does: with the
// peer's identity and with AnyPeer, each with the protocol and with every
// protocol, each by the longest port prefix.
func (t *Tables) allows(ep uint32, dir Direction, peer Identity, proto model.Proto, port uint16) bool {
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
				if _, ok := t.Entries[Entry{Endpoint: ep, Dir: dir, Proto: pr, Peer: id, Port: masked, PortBits: uint8(bits)}]; ok {
					return true
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
		if !t.allows(ep.ID, Egress, t.PeerOf(dst), proto, port) {
			return false
		}
	}
	if ep, ok := t.Endpoints[dst]; ok && ep.IsolatedIngress {
		peer := t.PeerOf(src)
		if peer != Host && !t.allows(ep.ID, Ingress, peer, proto, port) {
			return false
		}
	}
	return true
}
