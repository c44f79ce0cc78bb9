// Command netcube-cni is netcube's CNI plugin (spec 1.1): the container
// runtime runs it with the conflist the agent installs. See pkg/cni.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/netcube/netcube/pkg/cni"
)

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    cni.Add,
		Del:    cni.Del,
		Check:  cni.Check,
		GC:     cni.GC,
		Status: cni.Status,
	}, version.All, "netcube-cni: netcube's pod network")
}
