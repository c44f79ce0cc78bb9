package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/l2announce"
	"github.com/netcube/netcube/pkg/model"
)

// The values of --l2-announce (l2Announce): who answers ARP and NDP for
// a LoadBalancer IP on the uplinks.
const (
	// L2AnnounceElected: one node per address, elected from heartbeats
	// between the agents (pkg/l2announce), which sends gratuitous ARP and
	// unsolicited NA when it takes an address over.
	L2AnnounceElected = "elected"
	// L2AnnounceAll: every eligible node (every node for Cluster, those
	// with a local endpoint for Local); no heartbeats.
	L2AnnounceAll = "all"
)

// electing is what the agent needs of the Service reconciler to elect
// announcers: the lb cube's.
type electing interface {
	SetElector(lb.Elector)
	ResyncLoadBalancers()
}

// l2Announce is the running election, or nothing (nodes is then empty).
type l2Announce struct {
	nodes []cube.NodeHandler // the membership, told of every Node
}

// startL2Announce starts the heartbeats on this node's uplink addresses
// and the election of each LoadBalancer IP's announcer, gives the
// reconciler the elector (before its Run), serves the state on the local
// API (l2announce.APIPath), and resyncs the Services with LoadBalancer IPs
// once the initial sync is applied and whenever the alive nodes change.
//
// A hollow agent runs no heartbeats and sends no gratuitous ARP: it shares
// its machine with other hollow agents, cannot bind the node's addresses,
// and has no uplink; it announces as with --l2-announce=all (in memory).
func startL2Announce(ctx context.Context, cfg Config, hollow bool, node model.Node, uplinks []string,
	rec cube.Reconciler, api map[string]http.Handler) (l2Announce, error) {
	switch cfg.L2Announce {
	case "", L2AnnounceElected:
	case L2AnnounceAll:
		return l2Announce{}, nil
	default:
		return l2Announce{}, fmt.Errorf("--l2-announce (l2Announce) %q: want %s or %s", cfg.L2Announce, L2AnnounceElected, L2AnnounceAll)
	}
	if cfg.L2HeartbeatPort < 0 || cfg.L2HeartbeatPort > 65535 {
		return l2Announce{}, fmt.Errorf("--l2-heartbeat-port (l2HeartbeatPort) %d: want a UDP port, or 0 for no heartbeats", cfg.L2HeartbeatPort)
	}
	if hollow {
		return l2Announce{}, nil
	}
	lbr, ok := rec.(electing)
	if !ok {
		slog.Warn("l2 announce: the Service reconciler cannot take an elector; every eligible node announces", "reconciler", fmt.Sprintf("%T", rec))
		return l2Announce{}, nil
	}
	if cfg.L2HeartbeatPort == 0 {
		slog.Info("l2 announce: no heartbeats (--l2-heartbeat-port 0): every eligible node answers ARP/NDP for the LoadBalancer IPs")
		return l2Announce{}, nil
	}
	var addrs []netip.Addr
	for _, a := range node.Addrs {
		if !a.IsLinkLocalUnicast() {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		slog.Info("l2 announce: no uplink address to send heartbeats from; every eligible node answers ARP/NDP for the LoadBalancer IPs")
		return l2Announce{}, nil
	}
	links, err := lb.UplinksByName(uplinks)
	if err != nil {
		return l2Announce{}, err
	}
	tr, err := l2announce.ListenUDP(addrs, uint16(cfg.L2HeartbeatPort))
	if err != nil {
		return l2Announce{}, err
	}
	sender, err := l2announce.NewSender(links)
	if err != nil {
		// Without CAP_NET_RAW: every eligible node answers, as before,
		// rather than an elected one that cannot tell the link.
		tr.Close()
		slog.Warn("l2 announce: cannot send gratuitous ARP/NA; every eligible node answers ARP/NDP for the LoadBalancer IPs", "err", err)
		return l2Announce{}, nil
	}
	m := l2announce.NewMembership(node.Name, tr, l2announce.Options{})
	el := l2announce.NewElector(m, sender.Announce)
	lbr.SetElector(el)
	api[l2announce.APIPath] = el.Handler()
	go tr.Serve(ctx, m.Receive)
	go m.Run(ctx)
	go func() {
		defer sender.Close()
		select {
		case <-rec.Synced():
		case <-ctx.Done():
			return
		}
		lbr.ResyncLoadBalancers() // what the nodes heard of each other by the time the initial sync ended
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.Changes():
				lbr.ResyncLoadBalancers()
			}
		}
	}()
	slog.Info("l2 announce: one node per LoadBalancer IP, elected from heartbeats", "addrs", tr.Addrs(), "uplinks", uplinks,
		"interval", l2announce.DefaultInterval, "dead_after", l2announce.DefaultMisses*l2announce.DefaultInterval)
	return l2Announce{nodes: []cube.NodeHandler{m}}, nil
}
