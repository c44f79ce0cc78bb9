// Package sandbox builds a small cluster on one machine: each node is a
// network namespace with its NIC on a shared underlay bridge (in a namespace
// of its own, so nothing touches the host's network) and a Node object
// giving its pod CIDRs, one agent per node, and each pod a namespace wired
// by the CNI plugin through libcni, as a runtime on the node would, with a
// cgroup under the node's. For the pod-network benchmark, a sandbox can run
// flannel with the bridge plugin instead of netcube. Tests, the demo and
// the benchmarks all run in it.
//
// Everything it creates is named after the sandbox (namespaces "<name>-*",
// cgroup "netcube-<name>", pins "/sys/fs/bpf/netcube/<name>"), so Down can
// remove it all by name, also after a crash that lost the state directory.
package sandbox
