/* parse_xdp.h: parse.h's flow, read from an XDP frame by direct access.
 * Only what the XDP program translates itself becomes a flow: TCP and UDP
 * over IPv4 (options allowed) or IPv6 with no extension header, not a
 * fragment. Everything else the program passes to tc, whose parse_flow
 * knows fragments, extension headers and SCTP. */
#pragma once
#include "parse.h"

/* parse_flow_xdp fills f and returns 0, or returns -1: not a flow XDP
 * handles. */
static always_inline int parse_flow_xdp(struct xdp_md *ctx, struct flow *f)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__be16 *ports;

	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end || ip->ihl < 5)
			return -1;
		if (ip->frag_off & bpf_htons(0x3fff)) /* more fragments, or an offset */
			return -1;
		f->family = 4;
		f->proto = ip->protocol;
		f->l4_off = L3_OFF + ip->ihl * 4;
		addr_from_v4(&f->saddr, ip->saddr);
		addr_from_v4(&f->daddr, ip->daddr);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return -1;
		f->family = 6;
		f->proto = ip6->nexthdr;
		f->l4_off = L3_OFF + sizeof(*ip6);
		addr_from_v6(&f->saddr, ip6->saddr.in6_u.u6_addr32);
		addr_from_v6(&f->daddr, ip6->daddr.in6_u.u6_addr32);
	} else {
		return -1;
	}
	if (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP)
		return -1;
	if (f->l4_off > 60 + L3_OFF) /* keeps the verifier's offsets bounded */
		return -1;
	ports = data + f->l4_off;
	if ((void *)(ports + 2) > end)
		return -1;
	f->sport = ports[0];
	f->dport = ports[1];
	if (f->proto == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)ports;

		if ((void *)(tcp + 1) > end)
			return -1;
		f->tcp_flags = ((__u8 *)tcp)[13];
	} else if ((void *)ports + sizeof(struct udphdr) > end) {
		return -1;
	}
	return 0;
}
