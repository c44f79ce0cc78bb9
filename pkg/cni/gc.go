package cni

import (
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/netcube/netcube/pkg/ipam"
)

// GC is CNI GC: it releases every allocation of this network whose
// attachment the runtime did not list as valid, and removes its veth.
func GC(args *skel.CmdArgs) error {
	c, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	store, err := c.store()
	if err != nil {
		return err
	}
	var keep []ipam.Attachment
	for _, a := range c.ValidAttachments {
		keep = append(keep, ipam.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	released, err := store.GC(keep)
	if err != nil {
		return ipamError(err)
	}
	var failed []string
	for _, al := range released {
		if err := removeHostIf(HostIfName(al.ContainerID, al.IfName)); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", al.Attachment, err))
		}
	}
	if len(failed) > 0 {
		return types.NewError(types.ErrInternal, "netcube-cni: GC could not remove some veths", strings.Join(failed, "; "))
	}
	return nil
}

// Status is CNI STATUS: ready when the agent is.
func Status(args *skel.CmdArgs) error {
	c, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	if err := (agent{socket: c.AgentSocket}).status(); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "netcube-cni: the netcube agent is not ready", err.Error())
	}
	return nil
}
