package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
// API (l2announce.APIPath) and as metrics (l2metrics.go), and resyncs the
// Services with LoadBalancer IPs once the initial sync is applied and
// whenever the alive nodes change.
//
// A hollow agent runs the election only on the loopback addresses
// --l2-heartbeat-addrs gives it (it shares its machine with other hollow
// agents and cannot bind the node's addresses), and sends no gratuitous
// ARP (it has no uplink): it counts its takeovers instead, so that bench
// scale-l2 sees the addresses move. Without them it announces as with
// --l2-announce=all (in memory).
func startL2Announce(ctx context.Context, cfg Config, hollow bool, node model.Node, uplinks []string,
	rec cube.Reconciler, api map[string]http.Handler, reg prometheus.Registerer) (l2Announce, error) {
	if err := checkL2Announce(cfg); err != nil {
		return l2Announce{}, err
	}
	if cfg.L2Announce == L2AnnounceAll || hollow && len(cfg.L2HeartbeatAddrs) == 0 {
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
	if hollow {
		for _, a := range cfg.L2HeartbeatAddrs {
			addrs = append(addrs, netip.MustParseAddr(strings.TrimSpace(a))) // checkL2Announce parsed them
		}
	} else {
		for _, a := range node.Addrs {
			if !a.IsLinkLocalUnicast() {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		slog.Info("l2 announce: no uplink address to send heartbeats from; every eligible node answers ARP/NDP for the LoadBalancer IPs")
		return l2Announce{}, nil
	}
	announce, closeSender := func(netip.Addr) {}, func() {}
	if !hollow {
		links, err := lb.UplinksByName(uplinks)
		if err != nil {
			return l2Announce{}, err
		}
		sender, err := l2announce.NewSender(links)
		if err != nil {
			// Without CAP_NET_RAW: every eligible node answers, as before,
			// rather than an elected one that cannot tell the link.
			slog.Warn("l2 announce: cannot send gratuitous ARP/NA; every eligible node answers ARP/NDP for the LoadBalancer IPs", "err", err)
			return l2Announce{}, nil
		}
		announce, closeSender = sender.Announce, sender.Close
	}
	tr, err := l2announce.ListenUDP(addrs, uint16(cfg.L2HeartbeatPort))
	if err != nil {
		closeSender()
		return l2Announce{}, err
	}
	m := l2announce.NewMembership(node.Name, tr, l2announce.Options{Interval: cfg.L2HeartbeatInterval.Duration})
	met := newL2Metrics()
	el := l2announce.NewElector(m, met.counting(announce))
	if err := met.register(reg, el); err != nil {
		tr.Close()
		closeSender()
		return l2Announce{}, err
	}
	lbr.SetElector(el)
	api[l2announce.APIPath] = el.Handler()
	go tr.Serve(ctx, m.Receive)
	go m.Run(ctx)
	go func() {
		defer closeSender()
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
	interval := cmp.Or(cfg.L2HeartbeatInterval.Duration, l2announce.DefaultInterval)
	slog.Info("l2 announce: one node per LoadBalancer IP, elected from heartbeats", "addrs", tr.Addrs(), "uplinks", uplinks,
		"hollow", hollow, "interval", interval, "dead_after", l2announce.DefaultMisses*interval)
	return l2Announce{nodes: []cube.NodeHandler{m}}, nil
}

// minHeartbeatInterval: below it, heartbeats to a hundred nodes are a
// flood, and a scheduling hiccup of the agent declares its peers dead.
const minHeartbeatInterval = 10 * time.Millisecond

// checkL2Announce refuses the l2 announce settings that cannot work,
// naming each flag.
func checkL2Announce(cfg Config) error {
	var errs []error
	switch cfg.L2Announce {
	case "", L2AnnounceElected, L2AnnounceAll:
	default:
		errs = append(errs, fmt.Errorf("--l2-announce (l2Announce) %q: want %s or %s", cfg.L2Announce, L2AnnounceElected, L2AnnounceAll))
	}
	if cfg.L2HeartbeatPort < 0 || cfg.L2HeartbeatPort > 65535 {
		errs = append(errs, fmt.Errorf("--l2-heartbeat-port (l2HeartbeatPort) %d: want a UDP port, or 0 for no heartbeats", cfg.L2HeartbeatPort))
	}
	if iv := cfg.L2HeartbeatInterval.Duration; iv != 0 && iv < minHeartbeatInterval { // 0: the default
		errs = append(errs, fmt.Errorf("--l2-heartbeat-interval (l2HeartbeatInterval) %s: want at least %s", iv, minHeartbeatInterval))
	}
	if len(cfg.L2HeartbeatAddrs) == 0 {
		return errors.Join(errs...)
	}
	given := strings.Join(cfg.L2HeartbeatAddrs, ",")
	if cfg.Datapath != DatapathMemory {
		errs = append(errs, fmt.Errorf("--l2-heartbeat-addrs %q without --datapath=memory: a node's agent sends heartbeats from its uplinks' addresses; only hollow agents, sharing one machine, are given loopback ones", given))
	}
	if cfg.L2Announce == L2AnnounceAll {
		errs = append(errs, fmt.Errorf("--l2-heartbeat-addrs %q with --l2-announce=all: no election runs, no heartbeat is sent", given))
	}
	if cfg.L2HeartbeatPort == 0 {
		errs = append(errs, fmt.Errorf("--l2-heartbeat-addrs %q with --l2-heartbeat-port 0: no heartbeat is sent", given))
	}
	for _, s := range cfg.L2HeartbeatAddrs {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--l2-heartbeat-addrs: %q is not an IP address", s))
		case !a.IsLoopback():
			errs = append(errs, fmt.Errorf("--l2-heartbeat-addrs: %s is not a loopback address (a hollow agent binds no address of the host's links)", a))
		}
	}
	return errors.Join(errs...)
}
