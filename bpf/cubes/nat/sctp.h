/* sctp.h: SCTP's checksum across a NAT rewrite. SCTP's checksum is a
 * CRC32c of the SCTP packet alone (RFC 9260, 6.8, appendix B): no IP
 * pseudo-header, so a new address leaves it as it is; a new port changes
 * it. Recomputing it would read the whole packet. Instead it is updated:
 * a CRC is linear over GF(2), so for two packets of the same length L
 * that differ only in their first 4 bytes (the ports),
 *   crc(new) = crc(old) ^ (d * x^(8L) mod P),
 * d the XOR of the two 4-byte words (little-endian: the bit order of the
 * reflected CRC), P Castagnoli's polynomial. x^(8L) mod P is the product
 * of four table entries, one per hex digit of L (sctp_crc_x8n), so an
 * update is four 32-step carry-less products whatever the packet's size
 * (Cilium instead never rewrites an SCTP port: a Service's port must equal
 * its targetPort; netcube keeps NodePorts and SNAT ports for SCTP).
 * pkg/cubes/nat's TestSCTPCRCTable recomputes the table; the datapath's
 * SCTP rows check updated packets byte for byte against gopacket's CRC.
 */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"

#define CRC32C_POLY 0x82F63B78 /* Castagnoli, bit-reflected */

/* sctp_crc_x8n[j][n] = x^(8 * n * 16^j) mod P, bit-reflected (x^0 is bit
 * 31): the CRC's shift across n * 16^j bytes. */
static const __u32 sctp_crc_x8n[4][16] = {
	{0x80000000, 0x00800000, 0x00008000, 0x00000080, 0x82f63b78, 0xfbc3faf9, 0x8b277743, 0x52a0c93f,
	 0x6ea2d55c, 0x1c08b7d6, 0xf56e0ef4, 0x34019664, 0xa66805eb, 0x7a1f6b24, 0xe75d06aa, 0xc94ec098},
	{0x80000000, 0x18b8ea18, 0x510ac59a, 0xb2dea967, 0xb82be955, 0x36c41f1c, 0x19b29a35, 0xc9e90b9e,
	 0xb8fdb1e7, 0xe55ef1f3, 0x1fe0b5c3, 0xe0553f1e, 0x18e4a304, 0x2b830011, 0x56993a31, 0x0246e2e6},
	{0x80000000, 0x88e56f72, 0x74c360a4, 0x631bb273, 0xe4172b16, 0x71892b1b, 0x835305c9, 0x196b1eae,
	 0x0d65762a, 0xafc81338, 0xb5a50ab7, 0xf373c3ac, 0x5f60970f, 0xd46d3063, 0x3a5275ea, 0x02331c01},
	{0x80000000, 0x35d73a62, 0x28461564, 0x43eefc9f, 0xbf455269, 0x5edcdeb9, 0x65059450, 0x4e6f41a4,
	 0xe2ea32dc, 0xf5b95b32, 0x695a4c87, 0xf204502c, 0x9a4f01b6, 0x941a0916, 0x4303cb97, 0x4c3d3d65},
};

/* crc32c_mul is a * b mod P (bit-reflected), without branches. */
static always_inline __u32 crc32c_mul(__u32 a, __u32 b)
{
	__u32 p = 0;

	for (int i = 0; i < 32; i++) {
		p ^= b & -((a >> (31 - i)) & 1);
		b = (b >> 1) ^ (CRC32C_POLY & -(b & 1));
	}
	return p;
}

/* sctp_crc_delta is what the CRC of an SCTP packet of len bytes changes
 * by when its first 4 bytes change by d: d * x^(8 len) mod P. A global
 * function, so that the verifier checks its 128 steps once, with len and d
 * unknown, rather than at every rewrite of every program with the table's
 * values known (which took it past its million instructions). */
__attribute__((noinline)) __u32 sctp_crc_delta(__u32 len, __u32 d)
{
	__u32 x = crc32c_mul(crc32c_mul(sctp_crc_x8n[0][len & 15], sctp_crc_x8n[1][(len >> 4) & 15]),
			     crc32c_mul(sctp_crc_x8n[2][(len >> 8) & 15], sctp_crc_x8n[3][(len >> 12) & 15]));

	return crc32c_mul(x, d);
}

/* sctp_len is the length of f's SCTP packet (its IP payload), from the
 * IP header: a frame may carry padding past it. -1 if unreadable. */
static always_inline int sctp_len(struct __sk_buff *skb, const struct flow *f)
{
	__be16 len;

	if (f->family == 4) {
		if (bpf_skb_load_bytes(skb, L3_OFF + offsetof(struct iphdr, tot_len), &len, 2))
			return -1;
		return (int)bpf_ntohs(len) - (f->l4_off - L3_OFF);
	}
	if (bpf_skb_load_bytes(skb, L3_OFF + offsetof(struct ipv6hdr, payload_len), &len, 2))
		return -1;
	return (int)bpf_ntohs(len) - (f->l4_off - L3_OFF - (int)sizeof(struct ipv6hdr));
}

/* sctp_csum_ports updates f's SCTP checksum for the port of the given
 * side (0: source, 1: destination) going from `from` to `to` (both as in
 * the packet). 0, or -1: the first fragment of a datagram, whose CRC
 * covers fragments not seen here, cannot be updated.
 * A checksum of 0 is left alone: the sender's stack left it for the
 * device to fill (CHECKSUM_PARTIAL: an SCTP socket on a veth, which
 * offloads the CRC), and the kernel computes it over the rewritten bytes
 * when it leaves, with the field as it finds it, which must stay 0. (A
 * computed CRC of 0, one packet in 2^32, would be left stale.) */
static always_inline int sctp_csum_ports(struct __sk_buff *skb, const struct flow *f, int side,
					 __be16 from, __be16 to)
{
	__u32 off = f->l4_off + offsetof(struct sctp_common, checksum);
	__u32 csum, d;
	int len;

	if (f->frag != FRAG_NONE)
		return -1;
	if (bpf_skb_load_bytes(skb, off, &csum, 4))
		return -1;
	if (!csum)
		return 0;
	len = sctp_len(skb, f);
	if (len < (int)sizeof(struct sctp_common) || len > 0xffff)
		return -1;
	/* The ports' word as the CRC reads it (little-endian: this object is
	 * bpfel), source in its low half. */
	d = (__u32)(__u16)(from ^ to) << (side ? 16 : 0);
	csum ^= sctp_crc_delta(len, d);
	return bpf_skb_store_bytes(skb, off, &csum, 4, 0) ? -1 : 0;
}
