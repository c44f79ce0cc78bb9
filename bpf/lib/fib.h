/* fib.h: sends a translated packet straight to its next hop (FIB lookup
 * and redirect), bypassing the kernel's forwarding.
 */
#pragma once
#include "common.h"

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
