package lb

import (
	"fmt"

	"github.com/netcube/netcube/pkg/datapath"
)

// NodePort modes (--nodeport-mode): how a flow from outside reaches a
// backend on another node (bpf/cubes/lb/dsr.h).
const (
	NodePortSNAT   = "snat"   // SNAT to the node the flow came in on; replies come back through it
	NodePortDSR    = "dsr"    // direct server return: the backend's node answers the client
	NodePortHybrid = "hybrid" // DSR for TCP, SNAT for UDP
)

var nodePortModes = map[string]datapath.LBNodePortMode{
	NodePortSNAT:   datapath.LBNodePortSNAT,
	NodePortDSR:    datapath.LBNodePortDSR,
	NodePortHybrid: datapath.LBNodePortHybrid,
}

// NodePortVariables are the datapath's constants for a NodePort mode,
// set when the object is loaded. DSR carries the frontend in the packet
// to the backend's node over the underlay: an overlay (routing vxlan)
// would carry it inside the tunnel, where the receiving node's overlay
// program does not look for it, so that pairing is refused.
func NodePortVariables(mode, routing string) (map[string]any, error) {
	m, ok := nodePortModes[mode]
	if !ok {
		return nil, fmt.Errorf("nodePortMode (--nodeport-mode) %q: want snat, dsr or hybrid", mode)
	}
	if m != datapath.LBNodePortSNAT && routing == "vxlan" {
		return nil, fmt.Errorf("nodePortMode (--nodeport-mode) %q needs routing native or kernel, not vxlan: the frontend travels in the packet over the underlay", mode)
	}
	return map[string]any{"lb_nodeport": m}, nil
}
