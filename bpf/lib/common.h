/* common.h: includes, addresses and small helpers shared by every cube.
 *
 * Addresses are stored in one 16-byte form for both families: IPv6 as is,
 * IPv4 as an IPv4-mapped IPv6 address (::ffff:a.b.c.d). One map layout and
 * one Go writer then serve both families; the per-family code is limited to
 * header parsing and checksum arithmetic, where the families really differ.
 */
#pragma once

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/icmpv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef ECONNREFUSED
#define ECONNREFUSED 111
#endif
#ifndef EADDRINUSE
#define EADDRINUSE 98
#endif

/* linux/icmp.h drags in glibc's socket headers; ICMPv4 needs only this. */
struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be32 rest;
};
#define ICMP_DEST_UNREACH 3
#define ICMP_PORT_UNREACH 3

#define always_inline inline __attribute__((always_inline))

/* The clock and the random numbers the cubes read. The per-header tests
 * (bpf/test) define them first, to control time and chance. The clock is
 * CLOCK_MONOTONIC_COARSE: its ticks (a few ms) are far finer than any
 * timeout it is compared with, and it costs no clock-source read, which a
 * policy-checked packet paid once per check (bpf_ktime_get_ns: read_tsc,
 * ~30 ns in a VM). It is never ahead of CLOCK_MONOTONIC, what the agent
 * writes restored entries with (pkg/cubes/ct.Now). */
#ifndef nc_now
#define nc_now() bpf_ktime_get_coarse_ns()
#endif
#ifndef nc_random
#define nc_random() bpf_get_prandom_u32()
#endif

struct nc_addr {
	__u32 w[4]; /* network byte order; w[3] holds the IPv4 address */
};

/* nc_prefix: an LPM trie key over the 16-byte form (an IPv4 /n is a
 * prefix of 96 + n bits; ::/0 holds both families). */
struct nc_prefix {
	__u32 prefixlen;
	struct nc_addr addr;
};

static always_inline void addr_from_v4(struct nc_addr *a, __u32 ip4)
{
	a->w[0] = 0;
	a->w[1] = 0;
	a->w[2] = bpf_htonl(0x0000ffff);
	a->w[3] = ip4;
}

static always_inline void addr_from_v6(struct nc_addr *a, const __u32 *ip6)
{
	a->w[0] = ip6[0];
	a->w[1] = ip6[1];
	a->w[2] = ip6[2];
	a->w[3] = ip6[3];
}

static always_inline int addr_is_v4(const struct nc_addr *a)
{
	return a->w[0] == 0 && a->w[1] == 0 && a->w[2] == bpf_htonl(0x0000ffff);
}

static always_inline int addr_equal(const struct nc_addr *a, const struct nc_addr *b)
{
	return a->w[0] == b->w[0] && a->w[1] == b->w[1] && a->w[2] == b->w[2] && a->w[3] == b->w[3];
}

/* csum_fold folds a 32-bit one's complement sum into the 16-bit checksum. */
static always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* csum_apply adds diff (bpf_csum_diff's 32-bit sum of old words
 * complemented and new ones) to the checksum check. */
static always_inline __u16 csum_apply(__u16 check, __s64 diff)
{
	__u64 s = (__u16)~check;

	s += (__u32)diff;
	s = (s & 0xffffffff) + (s >> 32);
	return csum_fold((__u32)s);
}

