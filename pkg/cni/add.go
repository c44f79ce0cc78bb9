package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/ipam"
)

// The pod's next hop: link-local, answered by the host veth's MAC through
// a permanent neighbour entry in the pod (no ARP/ND, no address on the
// host side), as Calico and Cilium do.
var (
	Gateway4 = netip.MustParseAddr("169.254.1.1")
	Gateway6 = netip.MustParseAddr("fe80::1")
)

// HostIfPrefix starts every host-side pod veth's name.
const HostIfPrefix = "ncp"

// Plugin-specific error codes (the spec leaves 100 and up to plugins).
const (
	ErrInterfaceExists uint = 100 // ADD for an interface the pod already has
	ErrRangeFull       uint = 101 // no free address in a pod CIDR
)

// agentWait: how long ADD waits for the agent (a restart takes about a
// second) before it fails.
var agentWait = 3 * time.Second

// HostIfName is the host side of a pod's interface: stable for one
// container interface, so DEL and GC find it without state.
func HostIfName(containerID, ifName string) string {
	h := sha256.Sum256([]byte(containerID + "/" + ifName))
	return HostIfPrefix + hex.EncodeToString(h[:])[:11]
}

// Add is CNI ADD.
func Add(args *skel.CmdArgs) (err error) {
	c, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	podNS, err := netns.GetFromPath(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, "netcube-cni: the pod's network namespace", fmt.Sprintf("%s: %v", args.Netns, err))
	}
	defer podNS.Close()
	pod, err := netlink.NewHandleAt(podNS)
	if err != nil {
		return types.NewError(types.ErrInvalidNetNS, "netcube-cni: the pod's network namespace", err.Error())
	}
	defer pod.Close()
	if _, err := pod.LinkByName(args.IfName); err == nil {
		return types.NewError(ErrInterfaceExists, "netcube-cni: the pod already has interface "+args.IfName,
			fmt.Sprintf("container %s, netns %s: a second ADD would give it a second address", args.ContainerID, args.Netns))
	}
	ag := agent{socket: c.AgentSocket, wait: agentWait}
	if err := ag.status(); err != nil {
		return types.NewError(types.ErrTryAgainLater, "netcube-cni: the netcube agent is not ready", err.Error())
	}

	store, err := c.store()
	if err != nil {
		return err
	}
	att := ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
	addrs, err := store.Allocate(att, c.ranges)
	var full *ipam.RangeFullError
	switch {
	case errors.As(err, &full):
		return types.NewError(ErrRangeFull, "netcube-cni: no free pod address on this node", err.Error())
	case errors.Is(err, ipam.ErrAlreadyAllocated):
		return types.NewError(ErrInterfaceExists, "netcube-cni: the pod interface has addresses already", err.Error())
	case err != nil:
		return ipamError(err)
	}
	hostName := HostIfName(args.ContainerID, args.IfName)
	defer func() {
		if err != nil { // undo everything: nothing half-created
			if l, lerr := netlink.LinkByName(hostName); lerr == nil {
				_ = netlink.LinkDel(l)
			}
			_, _ = store.Release(att)
		}
	}()

	host, peer, err := createPair(c, hostName, args.IfName, podNS, pod)
	if err != nil {
		return types.NewError(types.ErrInternal, "netcube-cni: pod interface", err.Error())
	}
	if err := wirePod(pod, peer, host.Attrs().HardwareAddr, addrs); err != nil {
		return types.NewError(types.ErrInternal, "netcube-cni: pod side", err.Error())
	}
	if err := wireHost(host, peer.Attrs().HardwareAddr, addrs); err != nil {
		return types.NewError(types.ErrInternal, "netcube-cni: host side", err.Error())
	}
	ns, name := PodName(args.Args)
	if err := ag.podAdded(Pod{ContainerID: args.ContainerID, Namespace: ns, Name: name, IfName: args.IfName, Netns: args.Netns,
		HostIf: hostName, HostIfIndex: host.Attrs().Index, Addrs: addrs}); err != nil {
		return types.NewError(types.ErrTryAgainLater, "netcube-cni: the agent did not attach the pod", err.Error())
	}
	return types.PrintResult(result(c, args, host, peer, addrs), c.CNIVersion)
}

// PodName reads the Kubernetes pod's namespace and name from CNI_ARGS
// ("K8S_POD_NAMESPACE=x;K8S_POD_NAME=y;..."), as kubelet's runtime gives
// them; "" where absent.
func PodName(cniArgs string) (namespace, name string) {
	for _, kv := range strings.Split(cniArgs, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAMESPACE":
			namespace = v
		case "K8S_POD_NAME":
			name = v
		}
	}
	return namespace, name
}

// createPair makes the pod's device pair (c.PodDevice: a veth or a netkit
// pair), its pod end created directly in the pod's namespace under its
// final name. A host side left by an ADD that died half-way (same
// container, same name) is replaced.
func createPair(c *conf, hostName, ifName string, podNS netns.NsHandle, pod *netlink.Handle) (netlink.Link, netlink.Link, error) {
	if old, err := netlink.LinkByName(hostName); err == nil {
		if err := netlink.LinkDel(old); err != nil {
			return nil, nil, fmt.Errorf("remove stale %s: %w", hostName, err)
		}
	}
	la := netlink.NewLinkAttrs()
	la.Name = hostName
	la.MTU = c.MTU
	var pair netlink.Link = &netlink.Veth{LinkAttrs: la, PeerName: ifName, PeerNamespace: netlink.NsFd(int(podNS))}
	if c.PodDevice == PodDeviceNetkit {
		pair = newNetkit(la, ifName, netlink.NsFd(int(podNS)))
	}
	if err := netlink.LinkAdd(pair); err != nil {
		return nil, nil, fmt.Errorf("create %s %s/%s: %w", pair.Type(), hostName, ifName, err)
	}
	host, err := netlink.LinkByName(hostName)
	if err != nil {
		return nil, nil, err
	}
	peer, err := pod.LinkByName(ifName)
	if err != nil {
		return host, nil, err
	}
	return host, peer, nil
}

// newNetkit is a netkit pair in L2 mode (Ethernet, so the pod is wired as
// on a veth: the same next hop, answered by the node side's MAC). Until
// the agent has put its programs on the pair, what the pod sends is
// dropped (peer policy blackhole: no packet of a pod bypasses netcube's
// datapath, policy included), while the node may already send to it. The
// node side keeps the mark of what it sends to the pod (scrub none): the
// router marks what it has admitted, and to_pod_netkit drops the mark
// before the pod sees it.
// peerNS is the pod's namespace (nil: the current one).
func newNetkit(la netlink.LinkAttrs, peerName string, peerNS any) *netlink.Netkit {
	nk := &netlink.Netkit{LinkAttrs: la, Mode: netlink.NETKIT_MODE_L2,
		Policy: netlink.NETKIT_POLICY_FORWARD, PeerPolicy: netlink.NETKIT_POLICY_BLACKHOLE,
		Scrub: netlink.NETKIT_SCRUB_NONE, PeerScrub: netlink.NETKIT_SCRUB_DEFAULT}
	peer := netlink.NewLinkAttrs()
	peer.Name, peer.MTU, peer.Namespace = peerName, la.MTU, peerNS
	nk.SetPeerAttrs(&peer)
	return nk
}

// ProbeNetkit makes a netkit pair in the current network namespace and
// removes it: nil if this kernel can give pods netkit devices, else what
// it answered (the agent checks before it writes a conflist asking for
// them).
func ProbeNetkit() error {
	la := netlink.NewLinkAttrs()
	la.Name = fmt.Sprintf("ncnkprobe%d", os.Getpid()%100000)
	nk := newNetkit(la, la.Name+"p", nil)
	if err := netlink.LinkAdd(nk); err != nil {
		return fmt.Errorf("the kernel cannot make a netkit pair: %w", err)
	}
	if err := netlink.LinkDel(nk); err != nil {
		return fmt.Errorf("remove the probe netkit pair %s: %w", la.Name, err)
	}
	return nil
}

// wirePod: the pod's addresses, its next hop and default routes.
func wirePod(pod *netlink.Handle, link netlink.Link, hostMAC net.HardwareAddr, addrs []netip.Addr) error {
	if lo, err := pod.LinkByName("lo"); err == nil {
		if err := pod.LinkSetUp(lo); err != nil {
			return err
		}
	}
	if err := pod.LinkSetUp(link); err != nil {
		return err
	}
	idx := link.Attrs().Index
	for _, a := range addrs {
		// No DAD: the address is ours alone, and DAD would hold it
		// "tentative" for a second after the pod starts.
		if err := pod.AddrReplace(link, &netlink.Addr{IPNet: hostPrefix(a), Flags: unix.IFA_F_NODAD}); err != nil {
			return fmt.Errorf("address %s: %w", a, err)
		}
		gw, family := Gateway4, netlink.FAMILY_V4
		if a.Is6() {
			gw, family = Gateway6, netlink.FAMILY_V6
		}
		if err := pod.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: family, State: netlink.NUD_PERMANENT,
			IP: gw.AsSlice(), HardwareAddr: hostMAC}); err != nil {
			return fmt.Errorf("neighbour %s: %w", gw, err)
		}
		if a.Is4() { // 169.254.1.1 is on no subnet of the pod's: say it is on the link
			if err := pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: hostPrefix(gw), Scope: netlink.SCOPE_LINK}); err != nil {
				return fmt.Errorf("route to %s: %w", gw, err)
			}
		}
		if err := pod.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: defaultRoute(a), Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	return nil
}

// wireHost: a route and a permanent neighbour entry per pod address, so the
// node reaches the pod without ARP/ND.
func wireHost(host netlink.Link, podMAC net.HardwareAddr, addrs []netip.Addr) error {
	if err := netlink.LinkSetUp(host); err != nil {
		return err
	}
	idx := host.Attrs().Index
	for _, a := range addrs {
		family := netlink.FAMILY_V4
		if a.Is6() {
			family = netlink.FAMILY_V6
		}
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: hostPrefix(a), Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("route to %s: %w", a, err)
		}
		if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: family, State: netlink.NUD_PERMANENT,
			IP: a.AsSlice(), HardwareAddr: podMAC}); err != nil {
			return fmt.Errorf("neighbour %s: %w", a, err)
		}
	}
	return nil
}

func result(c *conf, args *skel.CmdArgs, host, peer netlink.Link, addrs []netip.Addr) *types100.Result {
	r := &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{
			{Name: host.Attrs().Name, Mac: host.Attrs().HardwareAddr.String(), Mtu: c.MTU},
			{Name: peer.Attrs().Name, Mac: peer.Attrs().HardwareAddr.String(), Mtu: c.MTU, Sandbox: args.Netns},
		},
	}
	podIf := 1
	for _, a := range addrs {
		gw := Gateway4
		if a.Is6() {
			gw = Gateway6
		}
		r.IPs = append(r.IPs, &types100.IPConfig{Interface: &podIf, Address: *hostPrefix(a), Gateway: gw.AsSlice()})
		r.Routes = append(r.Routes, &types.Route{Dst: *defaultRoute(a), GW: gw.AsSlice()})
	}
	return r
}

func hostPrefix(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

func defaultRoute(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: make(net.IP, a.BitLen()/8), Mask: net.CIDRMask(0, a.BitLen())}
}
