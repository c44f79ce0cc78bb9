package router

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
)

// The overlay: one VXLAN device in external (collect-metadata) mode, its
// remote end chosen per packet by to_overlay from router_nodes.
const (
	OverlayDevice = "nc_vxlan"
	VXLANPort     = 8472 // Linux's and flannel's default
	VNI           = 1
	// OverlayOverhead is what VXLAN adds to a packet over an IPv4
	// underlay (outer IPv4 20, UDP 8, VXLAN 8, inner Ethernet 14): the
	// overlay's, and so the pods', MTU is the uplink's less this.
	OverlayOverhead = 50
)

// ensureOverlay creates the overlay device, or checks and adjusts the one
// an earlier agent made, and brings it up without ARP (its peers' frames
// are addressed to it by the sending node's datapath).
func ensureOverlay(uplinkMTU int) (netlink.Link, error) {
	if uplinkMTU == 0 {
		uplinkMTU = 1500
	}
	mtu := uplinkMTU - OverlayOverhead
	l, err := netlink.LinkByName(OverlayDevice)
	var nf netlink.LinkNotFoundError
	switch {
	case errors.As(err, &nf):
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = OverlayDevice, mtu
		if err := netlink.LinkAdd(&netlink.Vxlan{LinkAttrs: la, FlowBased: true, Port: VXLANPort, Learning: false}); err != nil {
			return nil, fmt.Errorf("create %s: %w", OverlayDevice, err)
		}
	case err != nil:
		return nil, err
	default:
		v, ok := l.(*netlink.Vxlan)
		if !ok || !v.FlowBased || v.Port != VXLANPort {
			return nil, fmt.Errorf("%s exists but is not netcube's overlay (a collect-metadata VXLAN device on port %d): remove it", OverlayDevice, VXLANPort)
		}
		if l.Attrs().MTU != mtu {
			if err := netlink.LinkSetMTU(l, mtu); err != nil {
				return nil, err
			}
		}
	}
	if l, err = netlink.LinkByName(OverlayDevice); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetARPOff(l); err != nil {
		return nil, err
	}
	if err := noIPv6Addresses(l); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return nil, err
	}
	return netlink.LinkByName(OverlayDevice)
}

// noIPv6Addresses keeps the overlay device without IPv6 addresses: with
// a link-local one the kernel sends its router solicitations and duplicate
// address detection into the overlay, which carries nothing link-local
// (to_overlay). IPv6 pod traffic needs none: it is routed into the
// device, not from its address.
func noIPv6Addresses(l netlink.Link) error {
	if err := netlink.LinkSetIP6AddrGenMode(l, ip6AddrGenModeNone); err != nil {
		return fmt.Errorf("%s: no IPv6 link-local address: %w", OverlayDevice, err)
	}
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		return err
	}
	for _, a := range addrs { // made before (an older agent's device)
		if err := netlink.AddrDel(l, &a); err != nil {
			return fmt.Errorf("%s: remove %s: %w", OverlayDevice, a.IPNet, err)
		}
	}
	return nil
}

// ip6AddrGenModeNone is IN6_ADDR_GEN_MODE_NONE (linux/if_link.h).
const ip6AddrGenModeNone = 1

// removeOverlay removes the overlay device (native routing needs none).
func removeOverlay() error {
	l, err := netlink.LinkByName(OverlayDevice)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return err
	}
	return netlink.LinkDel(l)
}
