package cni

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/netcube/netcube/pkg/ipam"
)

// Defaults of the plugin's configuration fields.
const (
	DefaultDataDir     = "/var/lib/netcube/ipam"
	DefaultAgentSocket = "/run/netcube/cni.sock"
	DefaultMTU         = 1500
	// PluginType is the plugin's binary name, the conflist's "type".
	PluginType = "netcube-cni"
)

// The pods' devices (NetConf.PodDevice, the agent's --pod-device): a veth
// pair, or a netkit pair (Linux 6.7+), whose own programs are netcube's
// (as Cilium's since 1.16): a pod's packets enter the datapath as the pod
// transmits, without the veth's backlog pass.
const (
	PodDeviceVeth   = "veth"
	PodDeviceNetkit = "netkit"
)

// CheckPodDevice says whether d names a pod device ("": veth).
func CheckPodDevice(d string) error {
	switch d {
	case "", PodDeviceVeth, PodDeviceNetkit:
		return nil
	}
	return fmt.Errorf("%q is not a pod device: veth or netkit", d)
}

// NetConf is the plugin's entry in the conflist, as the agent writes it.
type NetConf struct {
	types.PluginConf
	// PodCIDRs: this node's pod CIDRs, at most one per family (the Node
	// object's spec.podCIDRs, or the manifest's).
	PodCIDRs []string `json:"podCIDRs"`
	// MTU of the pod's interface (and its host side); 0: DefaultMTU. An
	// overlay lowers it.
	MTU int `json:"mtu,omitempty"`
	// DataDir holds the address allocations.
	DataDir string `json:"dataDir,omitempty"`
	// AgentSocket is where the agent listens for pods.
	AgentSocket string `json:"agentSocket,omitempty"`
	// PodDevice is what pods are given: PodDeviceVeth ("": the default)
	// or PodDeviceNetkit.
	PodDevice string `json:"podDevice,omitempty"`
}

// conf is a NetConf checked and with its defaults applied.
type conf struct {
	NetConf
	ranges []netip.Prefix
}

// parseConf reads and checks the plugin's configuration. Every problem is
// named by its field, and all of them are reported at once.
func parseConf(stdin []byte) (*conf, error) {
	c := &conf{}
	if err := json.Unmarshal(stdin, &c.NetConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "netcube-cni: the network configuration is not valid JSON", err.Error())
	}
	var bad []string
	if c.Name == "" {
		bad = append(bad, `"name" is missing`)
	}
	if len(c.PodCIDRs) == 0 {
		bad = append(bad, `"podCIDRs" is missing or empty: the agent writes it once it knows this node's pod CIDRs`)
	}
	families := map[bool]string{}
	for i, s := range c.PodCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			bad = append(bad, fmt.Sprintf("podCIDRs[%d]: %q is not a CIDR", i, s))
			continue
		}
		if prev, dup := families[p.Addr().Is4()]; dup {
			bad = append(bad, fmt.Sprintf("podCIDRs[%d]: %s is a second CIDR of the family of %s (one per family)", i, s, prev))
			continue
		}
		families[p.Addr().Is4()] = s
		c.ranges = append(c.ranges, p.Masked())
	}
	switch {
	case c.MTU == 0:
		c.MTU = DefaultMTU
	case c.MTU < 1280 || c.MTU > 65535:
		// 1280: IPv6's minimum, and every pod is dual-stack capable.
		bad = append(bad, fmt.Sprintf(`"mtu": %d is not in 1280-65535`, c.MTU))
	}
	if err := CheckPodDevice(c.PodDevice); err != nil {
		bad = append(bad, `"podDevice": `+err.Error())
	}
	if c.PodDevice == "" {
		c.PodDevice = PodDeviceVeth
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.AgentSocket == "" {
		c.AgentSocket = DefaultAgentSocket
	}
	if len(bad) > 0 {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("netcube-cni: invalid network configuration %q", c.Name), strings.Join(bad, "; "))
	}
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.PluginConf); err != nil {
			return nil, types.NewError(types.ErrDecodingFailure, "netcube-cni: prevResult", err.Error())
		}
	}
	return c, nil
}

// store opens the address allocations the configuration names.
func (c *conf) store() (*ipam.Store, error) {
	s, err := ipam.Open(c.DataDir)
	if err != nil {
		return nil, ipamError(err)
	}
	return s, nil
}

// ipamError is a failure of the address store, as the runtime gets it.
func ipamError(err error) error {
	return types.NewError(types.ErrIOFailure, "netcube-cni: IPAM", err.Error())
}
