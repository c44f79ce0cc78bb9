/* nat_xdp.h: the NAT cube's rewrite for the XDP program, which has no
 * skb helpers: both sides of a flow (SNAT and DNAT, as a Service flow from
 * outside to a backend on another node needs) rewritten in place by
 * direct access, the IPv4 header and TCP/UDP checksums updated by the
 * difference (RFC 1624), as nat.h does through bpf_l3/l4_csum_replace. */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "cubes/monitor/monitor.h"

/* csum_apply adds diff (bpf_csum_diff's 32-bit sum of old words
 * complemented and new ones) to the checksum check. */
static always_inline __u16 csum_apply(__u16 check, __s64 diff)
{
	__u64 s = (__u16)~check;

	s += (__u32)diff;
	s = (s & 0xffffffff) + (s >> 32);
	return csum_fold((__u32)s);
}

struct nat_addrs {
	struct nc_addr saddr;
	struct nc_addr daddr;
};

/* nat_rewrite_xdp makes TCP/UDP packet f (parse_flow_xdp) go from
 * saddr:sport to daddr:dport. Returns 0, or -1 (the packet is then as it
 * was). An IPv4 UDP datagram without a checksum (0) keeps none. */
static always_inline int nat_rewrite_xdp(struct xdp_md *ctx, const struct flow *f,
					 const struct nc_addr *saddr, __be16 sport,
					 const struct nc_addr *daddr, __be16 dport)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct nat_addrs to = {.saddr = *saddr, .daddr = *daddr};
	__be16 old_ports[2] = {f->sport, f->dport}, new_ports[2] = {sport, dport};
	__u16 l4_off = f->l4_off;
	__be16 *ports;
	__sum16 *check;
	__s64 addrs_diff, l4_diff;

	if (l4_off > 60 + L3_OFF)
		return -1;
	ports = data + l4_off;
	if (f->proto == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)ports;

		if ((void *)(tcp + 1) > end)
			return -1;
		check = &tcp->check;
	} else {
		struct udphdr *udp = (void *)ports;

		if ((void *)(udp + 1) > end)
			return -1;
		check = &udp->check;
	}

	/* Both differences first: nothing is written unless all can be. */
	if (f->family == 4) {
		__be32 old4[2] = {f->saddr.w[3], f->daddr.w[3]}, new4[2] = {saddr->w[3], daddr->w[3]};

		addrs_diff = bpf_csum_diff(old4, sizeof(old4), new4, sizeof(new4), 0);
	} else {
		/* flow's saddr and daddr are adjacent, as in struct nat_addrs */
		addrs_diff = bpf_csum_diff((__be32 *)&f->saddr, sizeof(to), (__be32 *)&to, sizeof(to), 0);
	}
	if (addrs_diff < 0)
		return -1;
	/* The L4 checksum covers the addresses (pseudo-header) and ports. */
	l4_diff = bpf_csum_diff((__be32 *)old_ports, sizeof(old_ports), (__be32 *)new_ports, sizeof(new_ports),
				(__u32)addrs_diff);
	if (l4_diff < 0)
		return -1;

	if (f->family == 4) {
		struct iphdr *ip = data + L3_OFF;

		if ((void *)(ip + 1) > end)
			return -1;
		ip->check = csum_apply(ip->check, addrs_diff);
		ip->saddr = to.saddr.w[3];
		ip->daddr = to.daddr.w[3];
	} else {
		struct ipv6hdr *ip6 = data + L3_OFF;

		if ((void *)(ip6 + 1) > end)
			return -1;
		__builtin_memcpy(ip6->saddr.in6_u.u6_addr32, to.saddr.w, 16);
		__builtin_memcpy(ip6->daddr.in6_u.u6_addr32, to.daddr.w, 16);
	}
	if (f->proto == IPPROTO_TCP || f->family == 6 || *check != 0) {
		__u16 c = csum_apply(*check, l4_diff);

		if (f->proto == IPPROTO_UDP && c == 0)
			c = 0xffff; /* 0 would mean "no checksum" */
		*check = c;
	}
	ports[0] = sport;
	ports[1] = dport;
	mon_crossed(MON_CUBE_NAT);
	return 0;
}
