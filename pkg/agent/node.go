package agent

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// setupNode finds this node's uplinks (given, or those holding a default
// route; "none": no external access at all) and their addresses, attaches
// the node program to each, and returns the node as the cubes see it:
// NodePorts are served on every address found, as kube-proxy serves them on
// every node address by default, and the first of each family is the SNAT
// address; mtu is the smallest uplink MTU (0: no uplink).
func setupNode(dp *datapath.Datapath, name string, ifaces []string, accel string) (node model.Node, mtu int, uplinks []string, err error) {
	node = model.Node{Name: name}
	if accel != "none" && accel != "xdp" {
		return node, 0, nil, fmt.Errorf("--nodeport-acceleration (nodePortAcceleration) %q: want none or xdp", accel)
	}
	switch {
	case len(ifaces) == 0:
		ifaces = defaultRouteInterfaces()
	case len(ifaces) == 1 && ifaces[0] == "none": // a test agent on the machine's own network
		ifaces = nil
	}
	for _, ifname := range ifaces {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			return node, 0, nil, fmt.Errorf("node interface %s: %w", ifname, err)
		}
		if mtu == 0 || ifc.MTU < mtu {
			mtu = ifc.MTU
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return node, 0, nil, fmt.Errorf("node interface %s: %w", ifname, err)
		}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil || !p.Addr().IsGlobalUnicast() {
				continue
			}
			node.Addrs = append(node.Addrs, p.Addr().Unmap())
		}
		if err := dp.AttachNode(ifname, ifc.Index); err != nil {
			return node, 0, nil, err
		}
		if err := accelerate(dp, ifname, ifc.Index, accel); err != nil {
			return node, 0, nil, err
		}
	}
	slog.Info("node", "name", name, "interfaces", ifaces, "nodeport_addresses", node.Addrs, "mtu", mtu)
	return node, mtu, ifaces, nil
}

// accelerate attaches the XDP program to an uplink (accel "xdp") or
// removes one an earlier agent attached ("none"), after from_net is in
// place: the uplink's Service traffic is served throughout.
func accelerate(dp *datapath.Datapath, ifname string, ifindex int, accel string) error {
	if accel == "none" {
		return dp.DetachNodeXDP(ifname)
	}
	mode, err := dp.AttachNodeXDP(ifname, ifindex)
	if err != nil {
		return err
	}
	slog.Info("nodeport acceleration", "interface", ifname, "xdp", mode)
	return nil
}

// defaultRouteInterfaces: the interfaces of the default routes (IPv4 and
// IPv6), from the kernel's route tables in /proc.
func defaultRouteInterfaces() []string {
	var out []string
	add := func(name string) {
		if name != "lo" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, l := range strings.Split(string(b), "\n")[1:] {
			// Iface Destination Gateway ... Mask ...
			if f := strings.Fields(l); len(f) > 7 && f[1] == "00000000" && f[7] == "00000000" {
				add(f[0])
			}
		}
	}
	if b, err := os.ReadFile("/proc/net/ipv6_route"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			// dst dst_len src src_len next_hop metric refcnt use flags iface
			if f := strings.Fields(l); len(f) == 10 && f[0] == strings.Repeat("0", 32) && f[1] == "00" {
				add(f[9])
			}
		}
	}
	return out
}
