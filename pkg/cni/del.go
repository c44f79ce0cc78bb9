package cni

import (
	"errors"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/ipam"
)

// Del is CNI DEL: it releases the addresses and removes the veth (its pod
// end goes with it). Whatever is already gone (the namespace, the
// allocation, the veth) is skipped, so a repeated DEL succeeds.
func Del(args *skel.CmdArgs) error {
	c, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	store, err := c.store()
	if err != nil {
		return err
	}
	hostName := HostIfName(args.ContainerID, args.IfName)
	if err := removeHostIf(hostName); err != nil {
		return types.NewError(types.ErrInternal, "netcube-cni: remove the pod's veth", err.Error())
	}
	addrs, err := store.Release(ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName})
	if err != nil {
		return ipamError(err)
	}
	// The agent's links went with the veth; telling it is a courtesy
	// (a DEL must succeed with the agent down).
	ag := agent{socket: c.AgentSocket}
	_ = ag.podDeleted(Pod{ContainerID: args.ContainerID, IfName: args.IfName, HostIf: hostName, Addrs: addrs})
	return nil
}

func removeHostIf(name string) error {
	l, err := netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return err
	}
	// The pod's namespace, once gone, takes the veth with it: the kernel
	// does so asynchronously, so it may vanish between the lookup and the
	// delete. Gone is what DEL wants.
	if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return err
	}
	return nil
}
