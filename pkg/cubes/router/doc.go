// Package router is the Go side of the router cube (bpf/cubes/router): it
// owns how packets reach pods. It writes this node's pods into
// router_endpoints (from the kernel: each pod veth and its permanent
// neighbour entries, made by the CNI plugin), the other nodes' pod CIDRs
// into router_nodes and into the node's route table (native routing: via
// the node's underlay address; VXLAN: through the overlay device, which it
// creates), and the mode into router_config. Pod CIDRs that overlap
// another node's are refused and reported. Redirecting packets is the
// datapath's (router.h).
package router
