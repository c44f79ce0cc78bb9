// Package cni is netcube's CNI plugin (netcube-cni, CNI spec 1.1) and its
// client of the agent's socket (the agent's side: pkg/cni/cnisocket).
//
// ADD gives a pod a veth pair (the host side named from the container ID,
// "ncp" + 11 hex digits), one address per pod CIDR from pkg/ipam, a default
// route through a link-local next hop (169.254.1.1 / fe80::1) that answers
// with the host veth's MAC by a permanent neighbour entry, and on the host a
// route and a neighbour entry per pod address. It then tells the agent over
// its socket, and the agent attaches the pod's programs before ADD returns.
// Any failure undoes what ADD made. DEL is idempotent; CHECK compares the
// pod with its ADD result; STATUS asks the agent; GC releases the addresses
// (and host veths) of attachments the runtime no longer has.
//
// Netlink goes through github.com/vishvananda/netlink handles bound to a
// namespace, so no thread ever switches namespace.
package cni
