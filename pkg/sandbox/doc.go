// Package sandbox builds a small cluster on one machine: each node is a
// network namespace with its NIC on a shared underlay bridge (in a namespace
// of its own, so nothing touches the host's network), each pod a namespace
// with a veth to its node and a cgroup under the node's, and one agent per
// node. Tests, the demo and the benchmarks all run in it.
//
// Everything it creates is named after the sandbox (namespaces "<name>-*",
// cgroup "netcube-<name>", pins "/sys/fs/bpf/netcube/<name>"), so Down can
// remove it all by name, also after a crash that lost the state directory.
package sandbox
