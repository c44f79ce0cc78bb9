/* nat.h: the NAT cube. Rewrites a flow's source or destination address and
 * port in place, keeping the IPv4 header and L4 checksums valid: TCP, UDP,
 * ICMP echo, and SCTP (whose CRC32c only a port changes: sctp.h). */
#pragma once
#include <stddef.h>
#include "lib/common.h"
#include "lib/parse.h"
#include "cubes/monitor/monitor.h"
#include "sctp.h"

enum nat_side {
	NAT_SRC = 0, /* reverse NAT: replies appear to come from the frontend */
	NAT_DST = 1, /* DNAT: frontend -> backend */
};

static always_inline int is_icmp(__u8 proto)
{
	return proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
}

static always_inline __u32 l4_csum_off(const struct flow *f)
{
	if (is_icmp(f->proto))
		return f->l4_off + offsetof(struct icmphdr, checksum);
	return f->l4_off + (f->proto == IPPROTO_TCP ? offsetof(struct tcphdr, check)
						    : offsetof(struct udphdr, check));
}

/* l4_port_off is where the port of side is; an ICMP echo has one
 * identifier for both (its request's source, its reply's destination). */
static always_inline __u32 l4_port_off(const struct flow *f, int side)
{
	if (is_icmp(f->proto))
		return f->l4_off + 4;
	return f->l4_off + (side == NAT_DST ? 2 : 0);
}

/* nat_rewrite replaces one side of f with to_addr:to_port (an ICMP echo:
 * its identifier). Returns 0 or -1. A later fragment of a datagram has no
 * L4 header: only its addresses change (the first fragment's L4 checksum,
 * which covers the whole datagram, took the whole change). ICMP's checksum
 * has no pseudo-header (ICMPv6's has), nor has SCTP's, whose new port
 * updates its CRC32c (sctp.h; a first fragment's port cannot change: -1). */
static always_inline int nat_rewrite(struct __sk_buff *skb, const struct flow *f, int side,
				     const struct nc_addr *to_addr, __be16 to_port)
{
	const struct nc_addr *from_addr = side == NAT_DST ? &f->daddr : &f->saddr;
	__be16 from_port = side == NAT_DST ? f->dport : f->sport;
	__u32 csum_off = l4_csum_off(f);
	/* UDP over IPv4 may carry no checksum (0): keep it that way. */
	__u64 l4_flags = f->proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	int later = f->frag == FRAG_LATER;
	int sctp = f->proto == IPPROTO_SCTP;
	int pseudo = f->proto != IPPROTO_ICMP && !sctp;

	if (sctp && f->frag == FRAG_FIRST && from_port != to_port)
		return -1; /* refused before anything changes (sctp_csum_ports) */

	if (f->family == 4) {
		__u32 addr_off = L3_OFF + (side == NAT_DST ? offsetof(struct iphdr, daddr)
							   : offsetof(struct iphdr, saddr));
		__be32 old = from_addr->w[3], new = to_addr->w[3];

		if ((!later && pseudo && bpf_l4_csum_replace(skb, csum_off, old, new, l4_flags | BPF_F_PSEUDO_HDR | 4)) ||
		    bpf_l3_csum_replace(skb, L3_OFF + offsetof(struct iphdr, check), old, new, 4) ||
		    bpf_skb_store_bytes(skb, addr_off, &new, 4, 0))
			return -1;
	} else {
		__u32 addr_off = L3_OFF + (side == NAT_DST ? offsetof(struct ipv6hdr, daddr)
							   : offsetof(struct ipv6hdr, saddr));
		struct nc_addr old = *from_addr, new = *to_addr;
		__s64 diff = bpf_csum_diff(old.w, 16, new.w, 16, 0);

		if (diff < 0 ||
		    (!later && pseudo && bpf_l4_csum_replace(skb, csum_off, 0, (__u32)diff, l4_flags | BPF_F_PSEUDO_HDR)) ||
		    bpf_skb_store_bytes(skb, addr_off, new.w, 16, 0))
			return -1;
	}

	if (from_port != to_port && !later) {
		__u32 port_off = l4_port_off(f, side);

		if ((sctp ? sctp_csum_ports(skb, f, side, from_port, to_port)
			  : bpf_l4_csum_replace(skb, csum_off, from_port, to_port, l4_flags | 2)) ||
		    bpf_skb_store_bytes(skb, port_off, &to_port, 2, 0))
			return -1;
	}
	mon_crossed(MON_CUBE_NAT);
	return 0;
}
