package hubble

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/netcube/netcube/pkg/hubble/peerpb"
	"github.com/netcube/netcube/pkg/model"
)

// DefaultClusterName is Cilium's name of a cluster that was given none:
// the one its TLS server names carry by default.
const DefaultClusterName = "default"

// PeersConfig is what the Peer service tells of each node's Hubble
// server.
type PeersConfig struct {
	// Port is where every node's Hubble server listens (the agents'
	// --hubble-listen-address port); 0: none, the address is the node's
	// IP alone.
	Port int
	// TLS: the servers speak TLS; each notification names the
	// certificate the node's server presents (TLSServerName).
	TLS bool
	// Cluster is the cluster's name ("": DefaultClusterName).
	Cluster string
}

// Peers is Hubble's Peer service (peer.Peer/Notify) over the cluster's
// Node objects: what hubble-relay reads to find every node's Hubble
// server. It is a cube.NodeHandler: the agent's node watch feeds it.
type Peers struct {
	cfg PeersConfig

	mu       sync.Mutex
	known    map[string]*peerpb.ChangeNotification // node name -> its PEER_ADDED
	watchers map[*peerWatcher]struct{}
}

// peerWatcher is one Notify stream: the changes it has not sent.
type peerWatcher struct {
	c chan *peerpb.ChangeNotification
	// overflowed: c was full; the stream ends (its client asks again and
	// gets the whole list) rather than miss a change.
	overflowed chan struct{}
}

// peerBuffer is how many changes a Notify client may be behind before its
// stream is ended.
const peerBuffer = 1024

// NewPeers returns a Peer service knowing no node yet.
func NewPeers(cfg PeersConfig) *Peers {
	if cfg.Cluster == "" {
		cfg.Cluster = DefaultClusterName
	}
	return &Peers{cfg: cfg, known: map[string]*peerpb.ChangeNotification{}, watchers: map[*peerWatcher]struct{}{}}
}

// TLSServerName is the name a node's Hubble certificate carries, as
// Cilium forms it: <node>.<cluster>.hubble-grpc.cilium.io, dots in either
// name made hyphens (so that every node's name is at the same DNS level,
// under one wildcard certificate *.<cluster>.hubble-grpc.cilium.io).
func TLSServerName(node, cluster string) string {
	if node == "" {
		return ""
	}
	if cluster == "" {
		cluster = DefaultClusterName
	}
	return strings.ReplaceAll(node, ".", "-") + "." + strings.ReplaceAll(cluster, ".", "-") + ".hubble-grpc.cilium.io"
}

// OnNode takes a node as its Node object describes it (nil: deleted) and
// tells every Notify client what changed. A node without an address is
// not a peer (no one could reach its server) until it has one.
func (p *Peers) OnNode(name string, n *model.NodeInfo) {
	var cn *peerpb.ChangeNotification
	if n != nil {
		cn = p.notification(name, n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.known[name]
	var change *peerpb.ChangeNotification
	switch {
	case cn == nil && old == nil:
		return
	case cn == nil:
		delete(p.known, name)
		change = &peerpb.ChangeNotification{Name: old.Name, Address: old.Address, Tls: old.Tls, Type: peerpb.ChangeNotificationType_PEER_DELETED}
	case old == nil:
		p.known[name] = cn
		change = cn
	case old.Address == cn.Address:
		return // labels, zone, pod CIDRs: nothing a peer tells
	default:
		p.known[name] = cn
		change = &peerpb.ChangeNotification{Name: cn.Name, Address: cn.Address, Tls: cn.Tls, Type: peerpb.ChangeNotificationType_PEER_UPDATED}
	}
	for w := range p.watchers {
		select {
		case w.c <- change:
		default:
			delete(p.watchers, w)
			close(w.overflowed)
		}
	}
}

// OnNodesSynced: nothing to do, deletions come as OnNode(name, nil).
func (p *Peers) OnNodesSynced() {}

// notification is n's PEER_ADDED, nil without an address.
func (p *Peers) notification(name string, n *model.NodeInfo) *peerpb.ChangeNotification {
	addr, ok := nodeAddress(n)
	if !ok {
		return nil
	}
	a := addr.String()
	if p.cfg.Port != 0 {
		a = net.JoinHostPort(a, strconv.Itoa(p.cfg.Port))
	}
	cn := &peerpb.ChangeNotification{Name: peerName(name, p.cfg.Cluster), Address: a, Type: peerpb.ChangeNotificationType_PEER_ADDED}
	if p.cfg.TLS {
		cn.Tls = &peerpb.TLS{ServerName: TLSServerName(name, p.cfg.Cluster)}
	}
	return cn
}

// peerName is the node's name as Cilium tells it: cluster/node outside
// the default cluster (hubble-relay names the node's flows by it).
func peerName(node, cluster string) string {
	if cluster == DefaultClusterName {
		return node
	}
	return cluster + "/" + node
}

// nodeAddress is the node's first IPv4 address (the InternalIP, as the
// Node object lists it first), else its first address.
func nodeAddress(n *model.NodeInfo) (netip.Addr, bool) {
	for _, a := range n.Addresses {
		if a.Is4() {
			return a, true
		}
	}
	if len(n.Addresses) > 0 {
		return n.Addresses[0], true
	}
	return netip.Addr{}, false
}

// Notify sends every known peer as PEER_ADDED, then each change, until
// the client goes. A client too slow to keep up has its stream ended
// (Unavailable): asking again, it gets the whole list.
func (p *Peers) Notify(_ *peerpb.NotifyRequest, stream grpc.ServerStreamingServer[peerpb.ChangeNotification]) error {
	w := &peerWatcher{c: make(chan *peerpb.ChangeNotification, peerBuffer), overflowed: make(chan struct{})}
	p.mu.Lock()
	initial := make([]*peerpb.ChangeNotification, 0, len(p.known))
	for _, cn := range p.known {
		initial = append(initial, cn)
	}
	p.watchers[w] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watchers, w)
		p.mu.Unlock()
	}()
	for _, cn := range initial {
		if err := stream.Send(cn); err != nil {
			return err
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-w.overflowed:
			return status.Error(codes.Unavailable, "peer changes came faster than this client read them; ask again")
		case cn := <-w.c:
			if err := stream.Send(cn); err != nil {
				return err
			}
		}
	}
}
