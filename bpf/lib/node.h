/* node.h: the node cube. What the node program needs beyond the LB: the
 * node's own addresses (the agent writes them), the choice of a source port
 * when a flow from outside is translated to this node (SNAT), and sending a
 * translated packet straight to its next hop.
 */
#pragma once
#include "common.h"
#include "parse.h"
#include "ct.h"

/* node_addrs: [NODE_ADDR_V4] and [NODE_ADDR_V6], this node's address for
 * each family (the source of SNATed flows); all zero: none. */
enum { NODE_ADDR_V4 = 0, NODE_ADDR_V6 = 1, NODE_ADDR_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct nc_addr);
	__uint(max_entries, NODE_ADDR_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} node_addrs SEC(".maps");

/* node_config[0]: what the socket hooks need to know of the node. */
struct node_config {
	__u64 netns_cookie;  /* the node's own network namespace (not a pod's) */
	__u16 nodeport_min;  /* the NodePort range, protected from bind() */
	__u16 nodeport_max;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct node_config);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} node_config SEC(".maps");

static always_inline const struct nc_addr *node_addr(__u8 family)
{
	__u32 k = family == 4 ? NODE_ADDR_V4 : NODE_ADDR_V6;
	struct nc_addr *a = bpf_map_lookup_elem(&node_addrs, &k);

	if (!a || (a->w[0] | a->w[1] | a->w[2] | a->w[3]) == 0)
		return NULL;
	return a;
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

/* SNAT source ports: above the kernel's default ephemeral range
 * (32768-60999), so this node's own connections never hold one. */
#define SNAT_PORT_MIN 61000
#define SNAT_PORT_SPAN 4536
#define SNAT_TRIES 16

/* snat_port picks a port of addr not in use towards the backend: the
 * client's port if it is in the range, else from a hash of the flow,
 * probing a few neighbours. Returns 0 when all are taken. */
static always_inline __be16 snat_port(const struct flow *f, const struct nc_addr *addr,
				      const struct nc_addr *baddr, __be16 bport)
{
	__u32 start = bpf_ntohs(f->sport);

	if (start < SNAT_PORT_MIN || start >= SNAT_PORT_MIN + SNAT_PORT_SPAN)
		start = SNAT_PORT_MIN + (f->saddr.w[3] ^ f->sport ^ bpf_get_prandom_u32()) % SNAT_PORT_SPAN;
	for (int i = 0; i < SNAT_TRIES; i++) {
		__u32 p = start + i;

		if (p >= SNAT_PORT_MIN + SNAT_PORT_SPAN)
			p -= SNAT_PORT_SPAN;
		if (!ct_reply_taken(baddr, bport, addr, bpf_htons(p), f->proto))
			return bpf_htons(p);
	}
	return 0;
}

#ifndef AF_INET
#define AF_INET 2
#define AF_INET6 10
#endif

/* redirect_to_next_hop sends a packet whose addresses were just translated
 * to saddr -> daddr straight out of the interface the FIB chooses. The
 * kernel's own forwarding would drop it: its source is now often one of
 * this node's addresses (a "martian" on input). If the FIB has no answer,
 * the kernel gets the packet as it is. */
static always_inline int redirect_to_next_hop(struct __sk_buff *skb, __u8 family,
					      const struct nc_addr *saddr, const struct nc_addr *daddr)
{
	struct bpf_fib_lookup p = {};
	struct bpf_redir_neigh nh = {};
	int rc;

	p.ifindex = skb->ingress_ifindex;
	if (family == 4) {
		p.family = AF_INET;
		p.ipv4_src = saddr->w[3];
		p.ipv4_dst = daddr->w[3];
	} else {
		p.family = AF_INET6;
		__builtin_memcpy(p.ipv6_src, saddr->w, 16);
		__builtin_memcpy(p.ipv6_dst, daddr->w, 16);
	}
	rc = bpf_fib_lookup(skb, &p, sizeof(p), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		void *data = (void *)(long)skb->data;
		void *end = (void *)(long)skb->data_end;
		struct ethhdr *eth = data;

		if ((void *)(eth + 1) > end)
			return TC_ACT_SHOT;
		__builtin_memcpy(eth->h_dest, p.dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, p.smac, ETH_ALEN);
		return bpf_redirect(p.ifindex, 0);
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		if (family == 4) {
			nh.nh_family = AF_INET;
			nh.ipv4_nh = p.ipv4_dst;
		} else {
			nh.nh_family = AF_INET6;
			__builtin_memcpy(nh.ipv6_nh, p.ipv6_dst, 16);
		}
		return bpf_redirect_neigh(p.ifindex, &nh, sizeof(nh), 0);
	}
	return TC_ACT_OK;
}
