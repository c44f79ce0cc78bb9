/* fib.h: sends a translated packet straight to its next hop (FIB lookup
 * and redirect), bypassing the kernel's forwarding.
 */
#pragma once
#include <stddef.h>
#include "common.h"
#include "cubes/monitor/monitor.h"

/* Where the TTL (IPv4) or hop limit (IPv6) is, after the Ethernet header. */
#define L3_TTL_OFF(family) (sizeof(struct ethhdr) + ((family) == 4 ? offsetof(struct iphdr, ttl) \
								 : offsetof(struct ipv6hdr, hop_limit)))

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
			return mon_drop_packet(skb, MON_AT_NONE, MON_DROP_MALFORMED);
		__builtin_memcpy(eth->h_dest, p.dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, p.smac, ETH_ALEN);
		mon_routed(MON_RT_FIB, p.ifindex, NULL);
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
		mon_routed(MON_RT_NEIGH, p.ifindex, NULL);
		return bpf_redirect_neigh(p.ifindex, &nh, sizeof(nh), 0);
	}
	return TC_ACT_OK;
}

/* ip_ttl_expires says whether the packet's TTL (hop limit) ends at this
 * hop: then the kernel must forward it, which answers its sender with
 * time exceeded (traceroute's first hop), before anything translates it. */
static always_inline int ip_ttl_expires(struct __sk_buff *skb, __u8 family)
{
	__u8 ttl;

	if (bpf_skb_load_bytes(skb, L3_TTL_OFF(family), &ttl, 1))
		return 0;
	return ttl <= 1;
}

/* ip_dec_ttl takes this hop off the packet's TTL (hop limit) as a router
 * does: a packet the datapath redirects past the kernel's forwarding. */
static always_inline int ip_dec_ttl(struct __sk_buff *skb, __u8 family)
{
	__u32 off = L3_TTL_OFF(family);
	__u8 ttl;

	if (bpf_skb_load_bytes(skb, off, &ttl, 1) || ttl == 0)
		return -1;
	if (family == 4) {
		/* The checksum covers TTL as the high byte of a 16-bit word. */
		if (bpf_l3_csum_replace(skb, L3_OFF + offsetof(struct iphdr, check), bpf_htons((__u16)ttl << 8),
					bpf_htons((__u16)(ttl - 1) << 8), 2))
			return -1;
	}
	ttl--;
	return bpf_skb_store_bytes(skb, off, &ttl, 1, 0);
}
