/* node_addr.h: the addresses flows are source-translated to: this node's
 * own (the agent writes them, pkg/cubes/nat), and the hairpin address.
 */
#pragma once
#include "lib/common.h"
#include "nat_maps.h"

static always_inline const struct nc_addr *node_addr(__u8 family)
{
	__u32 k = family == 4 ? NODE_ADDR_V4 : NODE_ADDR_V6;
	struct nc_addr *a = bpf_map_lookup_elem(&node_addrs, &k);

	if (!a || (a->w[0] | a->w[1] | a->w[2] | a->w[3]) == 0)
		return NULL;
	return a;
}

/* is_node_addr says whether a is this node's own address of its family
 * (a host-network endpoint's). */
static always_inline int is_node_addr(const struct nc_addr *a, __u8 family)
{
	const struct nc_addr *node = node_addr(family);

	return node && addr_equal(node, a);
}

/* The hairpin address: a pod reaching itself through a Service gets its
 * own packets from here, so that its answers leave the pod (towards its
 * gateway) and can be translated back. Link-local for IPv4 (as Cilium's
 * service loopback); a ULA for IPv6 ("nc"). */
static always_inline void hairpin_addr(struct nc_addr *a, __u8 family)
{
	if (family == 4) {
		addr_from_v4(a, bpf_htonl(0xa9fe2a01)); /* 169.254.42.1 */
		return;
	}
	a->w[0] = bpf_htonl(0xfd006e63); /* fd00:6e63::42 */
	a->w[1] = 0;
	a->w[2] = 0;
	a->w[3] = bpf_htonl(0x42);
}
