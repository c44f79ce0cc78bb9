/* router_maps.h: the router cube's maps and their layouts (logic:
 * router.h). The Go side, pkg/cubes/router, writes them all.
 */
#pragma once
#include "lib/common.h"

/* router_endpoints: this node's pods by address: the host-side veth whose
 * peer is the pod's interface, and the MACs a frame for the pod carries. */
struct router_endpoint {
	__u32 ifindex;     /* host-side veth */
	__u8 pod_mac[6];   /* destination: the pod's interface */
	__u8 host_mac[6];  /* source: the host-side veth (the pod's gateway) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct nc_addr);
	__type(value, struct router_endpoint);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} router_endpoints SEC(".maps");

/* router_nodes: the other nodes' pod CIDRs -> the node's underlay address
 * (the VXLAN tunnel's remote end). */
struct router_node {
	struct nc_addr underlay;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct nc_prefix);
	__type(value, struct router_node);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} router_nodes SEC(".maps");

/* How this node reaches the pods of other nodes. */
enum router_mode : __u32 {
	/* The underlay routes pod CIDRs (the agent installs a route per
	 * node): packets go to the FIB's next hop. */
	ROUTER_NATIVE = 0,
	/* A VXLAN overlay: packets are sent into the collect-metadata VXLAN
	 * device with the remote node as the tunnel's end. */
	ROUTER_VXLAN = 1,
	/* The kernel routes everything (native routes, router_endpoints left
	 * empty): the stack-routed path, kept as the benchmark's reference. */
	ROUTER_KERNEL = 2,
};

struct router_conf {
	enum router_mode mode;
	__u32 vxlan_ifindex;
	__u32 vni;
	__u8 vxlan_mac[6];
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct router_conf);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} router_config SEC(".maps");
