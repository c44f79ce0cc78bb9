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

/* router_sources: the addresses this node's pods may send from (their
 * own: the CNI plugin's permanent neighbour entries on each pod's device)
 * -> the host-side device they must arrive on. Written in every routing
 * mode (router_endpoints is left empty in the kernel's): from_pod drops
 * any other source (router_source_ok), so a pod cannot pose as another
 * pod, the node or a host outside to get past policy. */
/* router_check_sources: on in every node's datapath (the agent has no
 * flag for it); off only in the BPF_PROG_RUN tests of other cubes, whose
 * packets come from addresses no pod device owns (datapath.Config's
 * TrustSources). */
volatile const __u8 router_check_sources = 1;

struct router_source {
	__u32 ifindex; /* host-side veth (netkit: the primary device) */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct nc_addr);
	__type(value, struct router_source);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} router_sources SEC(".maps");

/* router_source_slots: router_sources' fast path, by device: slot
 * ifindex % ROUTER_SOURCE_SLOTS holds the device's pod and its one or two
 * addresses (one: written twice), so that most packets a pod sends are
 * checked by an array slot the verifier inlines instead of a hash of the
 * 16-byte source (about 10 ns a packet: docs/benchmarks/source-check.md).
 * A slot held by another device (two pods' ifindexes a multiple of the
 * size apart: the lower ifindex keeps it), an empty one, or a source the
 * slot does not hold sends the check to router_sources, which says what
 * is allowed; a slot only ever admits what router_sources holds too. */
#define ROUTER_SOURCE_SLOTS 4096 /* a power of two: the BPF masks with it (the Go side reads the map's size) */

struct router_source_slot {
	__u32 ifindex; /* host-side device; 0: empty */
	__u32 pad;
	struct nc_addr addrs[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct router_source_slot);
	__uint(max_entries, ROUTER_SOURCE_SLOTS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} router_source_slots SEC(".maps");

/* router_node_macs: the Ethernet addresses the other nodes of the cluster
 * send from (the neighbour entries of their addresses, learned by the
 * agent): only a frame from one of them may carry a DSR frontend
 * (cubes/lb/dsr.h), so a host outside cannot make a pod answer from an
 * address of its choosing (pkg/cubes/router nodemacs.go). */
struct router_mac {
	__u8 addr[6];
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct router_mac);
	__type(value, __u8);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} router_node_macs SEC(".maps");

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
