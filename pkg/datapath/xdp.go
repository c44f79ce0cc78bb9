package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"
)

// XDP attach modes: native (in the driver, before an skb exists; veth
// has it) or generic (after the skb is made, for any driver: the same
// program, most of the gain lost).
const (
	XDPNative  = "native"
	XDPGeneric = "generic"
)

// xdpLinkSuffix names a node uplink's XDP link pin: node-<ifname>-xdp.
const xdpLinkSuffix = "-xdp"

// AttachNodeXDP attaches xdp_from_net to a node uplink (already holding
// from_net, AttachNode), natively where the driver can run it, else in
// generic mode, and says which (or that an earlier agent's link was
// kept). A link pinned by an earlier agent is
// updated in place: the uplink is never without the program meanwhile.
func (d *Datapath) AttachNodeXDP(ifname string, ifindex int) (string, error) {
	pin := d.linkPin(nodeLinkPrefix + ifname + xdpLinkSuffix)
	prog := d.objs.XdpFromNet
	valid := func(l link.Link) bool {
		info, err := l.Info()
		if err != nil || info.XDP() == nil {
			return false
		}
		return int(info.XDP().Ifindex) == ifindex
	}
	mode := "" // stays empty when an earlier agent's link is updated
	err := d.attachOrUpdate(pin, prog, func() (link.Link, error) {
		mode = XDPNative
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPDriverMode})
		if err == nil {
			return l, nil
		}
		mode = XDPGeneric
		l, gerr := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: link.XDPGenericMode})
		if gerr != nil {
			return nil, errors.Join(fmt.Errorf("native: %w", err), fmt.Errorf("generic: %w", gerr))
		}
		return l, nil
	}, valid)
	if err != nil {
		return "", fmt.Errorf("attach xdp_from_net to %s: %w", ifname, err)
	}
	if mode == "" {
		mode = "as attached before (pinned link updated)"
	}
	return mode, nil
}

// DetachNodeXDP removes xdp_from_net from a node uplink (acceleration
// turned off); from_net then serves its traffic alone. No link: nothing
// to do.
func (d *Datapath) DetachNodeXDP(ifname string) error {
	return detachPinned(d.linkPin(nodeLinkPrefix + ifname + xdpLinkSuffix))
}
