package router

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// nodeMACsEvery is how often the other nodes' MACs are read again (a
// node's NIC replaced, an address moved).
const nodeMACsEvery = 10 * time.Second

// nodeMACs keeps router_node_macs equal to the Ethernet addresses the
// other nodes' addresses resolve to in this node's neighbour table: the
// only senders whose frames may carry a DSR frontend (router_maps.h). An
// address not resolved yet is probed (one datagram to its discard port
// makes the kernel resolve it), so the next pass finds it; until then a
// DSR flow from that node is refused (fail closed), and its client
// retries.
type nodeMACs struct {
	maps *cube.Maps

	mu    sync.Mutex
	addrs []netip.Addr // the other nodes'
	kick  chan struct{}
}

func newNodeMACs(maps *cube.Maps) *nodeMACs {
	return &nodeMACs{maps: maps, kick: make(chan struct{}, 1)}
}

// set replaces the other nodes' addresses and syncs soon.
func (m *nodeMACs) set(addrs []netip.Addr) {
	m.mu.Lock()
	m.addrs = addrs
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *nodeMACs) run(ctx context.Context) {
	t := time.NewTicker(nodeMACsEvery)
	defer t.Stop()
	for {
		if err := m.sync(); err != nil {
			slog.Error("router: the other nodes' MACs", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.kick:
			time.Sleep(200 * time.Millisecond) // a probe's answer
		}
	}
}

// usable: the neighbour states that hold a MAC the address answered for.
const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT

func (m *nodeMACs) sync() error {
	m.mu.Lock()
	addrs := m.addrs
	m.mu.Unlock()
	neighs, err := netlink.NeighList(0, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	macs := map[netip.Addr]net.HardwareAddr{}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP)
		if ok && n.State&usable != 0 && len(n.HardwareAddr) == 6 {
			macs[a.Unmap()] = n.HardwareAddr
		}
	}
	want := map[datapath.RouterMac]uint8{}
	for _, a := range addrs {
		mac, ok := macs[a]
		if !ok {
			probe(a)
			continue
		}
		var k datapath.RouterMac
		copy(k.Addr[:], mac)
		want[k] = 1
	}
	return converge(m.maps, MapNodeMACs, want)
}

// probe makes the kernel resolve a's MAC: a datagram to its discard port
// (RFC 863), which nothing answers.
func probe(a netip.Addr) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 9)))
	if err != nil {
		return
	}
	_, _ = c.Write([]byte{0})
	_ = c.Close()
}
