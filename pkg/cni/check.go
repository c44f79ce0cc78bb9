package cni

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/netcube/netcube/pkg/ipam"
)

// Check is CNI CHECK: the pod still has what ADD gave it (its interface
// with the same MAC, its addresses, its default routes) and the node still
// has the host side, its routes and the allocation.
func Check(args *skel.CmdArgs) error {
	c, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	if c.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "netcube-cni: CHECK needs prevResult", "")
	}
	prev, err := types100.NewResultFromResult(c.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "netcube-cni: prevResult", err.Error())
	}
	var problems []string
	bad := func(f string, a ...any) { problems = append(problems, fmt.Sprintf(f, a...)) }

	store, err := c.store()
	if err != nil {
		return err
	}
	held, err := store.Get(ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName})
	if err != nil {
		return ipamError(err)
	}
	var want []netip.Addr
	for _, ip := range prev.IPs {
		a, _ := netip.AddrFromSlice(ip.Address.IP)
		want = append(want, a.Unmap())
	}
	for _, a := range want {
		if !slices.Contains(held, a) {
			bad("IPAM: %s is not allocated to %s/%s", a, args.ContainerID, args.IfName)
		}
	}

	hostName := HostIfName(args.ContainerID, args.IfName)
	host, err := netlink.LinkByName(hostName)
	if err != nil {
		bad("host side %s: %v", hostName, err)
	} else {
		checkHostSide(host, bad, want)
	}

	podNS, err := netns.GetFromPath(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, "netcube-cni: the pod's network namespace", err.Error())
	}
	defer podNS.Close()
	pod, err := netlink.NewHandleAt(podNS)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, "netcube-cni: the pod's network namespace", err.Error())
	}
	defer pod.Close()
	link, err := pod.LinkByName(args.IfName)
	if err != nil {
		bad("pod interface %s: %v", args.IfName, err)
	} else {
		for _, ifc := range prev.Interfaces {
			if ifc.Sandbox != "" && ifc.Name == args.IfName && ifc.Mac != link.Attrs().HardwareAddr.String() {
				bad("pod interface %s: MAC %s, ADD gave %s", args.IfName, link.Attrs().HardwareAddr, ifc.Mac)
			}
		}
		if link.Attrs().OperState == netlink.OperDown {
			bad("pod interface %s is down", args.IfName)
		}
		addrs, _ := pod.AddrList(link, netlink.FAMILY_ALL)
		for _, a := range want {
			if !slices.ContainsFunc(addrs, func(x netlink.Addr) bool { return x.IP.Equal(a.AsSlice()) }) {
				bad("pod interface %s: address %s is missing", args.IfName, a)
			}
		}
		routes, _ := pod.RouteList(link, netlink.FAMILY_ALL)
		for _, a := range want {
			gw := Gateway4
			if a.Is6() {
				gw = Gateway6
			}
			if !slices.ContainsFunc(routes, func(r netlink.Route) bool {
				return r.Gw.Equal(gw.AsSlice()) && (r.Dst == nil || r.Dst.String() == defaultRoute(a).String())
			}) {
				bad("pod interface %s: the default route via %s is missing", args.IfName, gw)
			}
		}
	}
	if len(problems) > 0 {
		return types.NewError(types.ErrInternal, "netcube-cni: the pod's network is not what ADD made", strings.Join(problems, "; "))
	}
	return nil
}

// checkHostSide: the host side is up and routes each pod address.
func checkHostSide(l netlink.Link, bad func(string, ...any), addrs []netip.Addr) {
	what := "host side " + l.Attrs().Name
	if l.Attrs().Flags&net.FlagUp == 0 {
		bad("%s is down", what)
	}
	routes, _ := netlink.RouteList(l, netlink.FAMILY_ALL)
	for _, a := range addrs {
		if !slices.ContainsFunc(routes, func(r netlink.Route) bool { return r.Dst != nil && r.Dst.String() == hostPrefix(a).String() }) {
			bad("%s: the route to %s is missing", what, a)
		}
	}
}
