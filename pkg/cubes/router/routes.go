package router

import (
	"errors"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
)

// rtProto marks the routes the router installs ("nc"), so that it lists
// and removes only its own.
const rtProto netlink.RouteProtocol = 0x6e

// kernelRoutes is the node's main route table.
type kernelRoutes struct{}

func (kernelRoutes) Replace(r route) error {
	nr := &netlink.Route{Dst: ipnet(r.Dst), Protocol: rtProto, LinkIndex: r.Dev}
	if r.Via.IsValid() {
		nr.Gw = r.Via.AsSlice()
	}
	return netlink.RouteReplace(nr)
}

func (kernelRoutes) Delete(p netip.Prefix) error {
	err := netlink.RouteDel(&netlink.Route{Dst: ipnet(p), Protocol: rtProto})
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

func (kernelRoutes) List() ([]route, error) {
	var out []route
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: rtProto}, netlink.RT_FILTER_PROTOCOL)
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		a, _ := netip.AddrFromSlice(r.Dst.IP)
		ones, _ := r.Dst.Mask.Size()
		out = append(out, route{Dst: netip.PrefixFrom(a.Unmap(), ones), Dev: r.LinkIndex})
	}
	return out, err
}

// memoryRoutes is a hollow agent's route table: the routes it would
// install, kept in memory (the host's table is not its to change).
type memoryRoutes struct {
	routes map[netip.Prefix]route
}

func (m *memoryRoutes) Replace(r route) error {
	if m.routes == nil {
		m.routes = map[netip.Prefix]route{}
	}
	m.routes[r.Dst] = r
	return nil
}

func (m *memoryRoutes) Delete(p netip.Prefix) error {
	delete(m.routes, p)
	return nil
}

func (m *memoryRoutes) List() ([]route, error) {
	out := make([]route, 0, len(m.routes))
	for _, r := range m.routes {
		out = append(out, r)
	}
	return out, nil
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
