package agent

import (
	"fmt"
	"net"
	"net/netip"
	"os"
)

// NodeAddressHost, as the host of a bind address ("node:10256"), stands
// for the node's own address, which the chart gives the agent in
// NodeIPEnv (the downward API's status.hostIP): the metrics and health
// endpoints then listen on the address the kubelet probes and Prometheus
// scrapes, and on no other (not a pod-facing bridge, not a VPN), without
// the chart knowing each node's address or family.
const (
	NodeAddressHost = "node"
	NodeIPEnv       = "NODE_IP"
)

// resolveBindAddress is addr with a NodeAddressHost host replaced by the
// node's address; flag names the setting, for the error.
func resolveBindAddress(flag, addr string) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--%s %q: %w", flag, addr, err)
	}
	if host != NodeAddressHost {
		return addr, nil
	}
	v := os.Getenv(NodeIPEnv)
	if v == "" {
		return "", fmt.Errorf("--%s %q: the node's address comes from $%s (the chart sets it from status.hostIP), which is not set; give an address", flag, addr, NodeIPEnv)
	}
	ip, err := netip.ParseAddr(v)
	if err != nil {
		return "", fmt.Errorf("--%s %q: $%s %q is not an IP address", flag, addr, NodeIPEnv, v)
	}
	return net.JoinHostPort(ip.String(), port), nil
}
