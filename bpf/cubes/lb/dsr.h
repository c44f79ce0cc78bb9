/* dsr.h: direct server return for flows from outside (--nodeport-mode dsr
 * or hybrid). The frontend's node DNATs the packet to a backend on
 * another node but keeps the client as its source, and writes the
 * frontend (address and port) into it, right after the base IP header:
 * an IPv4 option or an IPv6 destination options header (parse.h, enum
 * dsr_opt). The backend's node keeps the frontend as the flow's reply
 * entry (dsr_record), and the backend's replies leave from it straight to
 * the client (xlate.h), never through the frontend's node.
 * What carries it: a TCP SYN (the backend's node keeps it from then on)
 * and every UDP datagram (there is no handshake); never a fragment, nor a
 * packet that already has IPv4 options or IPv6 extension headers (such a
 * flow is SNATed). Room: 8 bytes (IPv4) or 24 (IPv6) more on the wire, so
 * a SYN's MSS is lowered by as much (dsr_clamp_mss) and a TCP segment
 * still fits the client's MTU; a UDP datagram within that many bytes of
 * the MTU between the nodes does not fit: hybrid, the mode to use where
 * the nodes' MTU is the clients', SNATs UDP.
 * Written for tc and XDP alike: ctx is the program's context, xdp a
 * constant at each call site (the other branch is compiled out). */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "lb_maps.h"
#include "cubes/ct/ct.h"

static always_inline int ctx_load(void *ctx, int xdp, __u32 off, void *to, __u32 len)
{
	return xdp ? bpf_xdp_load_bytes(ctx, off, to, len) : bpf_skb_load_bytes(ctx, off, to, len);
}

static always_inline int ctx_store(void *ctx, int xdp, __u32 off, void *from, __u32 len)
{
	return xdp ? bpf_xdp_store_bytes(ctx, off, from, len) : bpf_skb_store_bytes(ctx, off, from, len, 0);
}

/* ctx_csum_diff adds diff (bpf_csum_diff's) to the checksum at off; l4:
 * a TCP/UDP checksum, which tc keeps right for a packet whose checksum
 * is still to be completed (CHECKSUM_PARTIAL). */
static always_inline int ctx_csum_diff(void *ctx, int xdp, __u32 off, __s64 diff, int l4)
{
	__u16 c;

	if (diff < 0)
		return -1;
	if (!xdp)
		return l4 ? bpf_l4_csum_replace(ctx, off, 0, (__u32)diff, 0) : bpf_l3_csum_replace(ctx, off, 0, (__u32)diff, 0);
	if (ctx_load(ctx, xdp, off, &c, 2))
		return -1;
	c = csum_apply(c, diff);
	return ctx_store(ctx, xdp, off, &c, 2);
}

/* lb_dsr_wanted says whether new flow f from outside, to a backend on
 * another node, goes there by DSR. */
static always_inline int lb_dsr_wanted(const struct flow *f)
{
	__u16 plain = L3_OFF + (f->family == 4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr));

	if (f->frag != FRAG_NONE || f->l4_off != plain)
		return 0;
	if (lb_nodeport == LB_NODEPORT_DSR)
		return f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP;
	if (lb_nodeport == LB_NODEPORT_HYBRID)
		return f->proto == IPPROTO_TCP;
	return 0;
}

/* dsr_carries says whether packet f of a DSR flow carries its frontend. */
static always_inline int dsr_carries(const struct flow *f)
{
	__u16 plain = L3_OFF + (f->family == 4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr));

	if (f->frag != FRAG_NONE || f->l4_off != plain)
		return 0;
	return f->proto == IPPROTO_UDP || (f->tcp_flags & TCP_FLAG_SYN);
}

/* dsr_overhead is what the frontend adds to a packet of f's family. */
static always_inline __u16 dsr_overhead(__u8 family)
{
	return family == 4 ? DSR_OPT4_LEN : DSR_HDR6_LEN;
}

/* dsr_clamp_mss lowers the MSS a TCP SYN f announces by the frontend's
 * room, so the client's segments, the frontend added, still fit its MTU.
 * A SYN without an MSS option is left as it is. 0, or -1. */
static always_inline int dsr_clamp_mss(void *ctx, int xdp, const struct flow *f)
{
	__u32 off = f->l4_off + sizeof(struct tcphdr), end;
	__u8 doff, kind, len;
	__be16 mss, clamped;

	if (ctx_load(ctx, xdp, f->l4_off + 12, &doff, 1))
		return -1;
	end = f->l4_off + (doff >> 4) * 4;
	for (int i = 0; i < 12 && off + 1 < end; i++) { /* 40 bytes of options */
		if (ctx_load(ctx, xdp, off, &kind, 1))
			return -1;
		if (kind == 0) /* end of options */
			return 0;
		if (kind == 1) { /* no-op */
			off++;
			continue;
		}
		if (ctx_load(ctx, xdp, off + 1, &len, 1) || len < 2)
			return -1;
		if (kind == 2 && len == 4) {
			__be32 from = 0, to = 0;

			if (ctx_load(ctx, xdp, off + 2, &mss, 2))
				return -1;
			if (bpf_ntohs(mss) <= 536 + dsr_overhead(f->family))
				return 0; /* never below TCP's default MSS */
			clamped = bpf_htons(bpf_ntohs(mss) - dsr_overhead(f->family));
			from = mss;
			to = clamped;
			return ctx_csum_diff(ctx, xdp, f->l4_off + offsetof(struct tcphdr, check),
					     bpf_csum_diff(&from, 4, &to, 4, 0), 1) ||
			       ctx_store(ctx, xdp, off + 2, &clamped, 2);
		}
		off += len;
	}
	return 0;
}

/* dsr_make_room opens the frontend's room right after the base IP
 * header of f's packet. */
static always_inline int dsr_make_room(void *ctx, int xdp, __u8 family)
{
	__u32 room = dsr_overhead(family);

	if (!xdp)
		return bpf_skb_adjust_room(ctx, room, BPF_ADJ_ROOM_NET, 0);
	if (bpf_xdp_adjust_head(ctx, -(int)room))
		return -1;
	/* The Ethernet and IP headers move to the new start. */
	if (family == 4) {
		__u8 h[sizeof(struct ethhdr) + sizeof(struct iphdr)];

		return ctx_load(ctx, xdp, DSR_OPT4_LEN, h, sizeof(h)) || ctx_store(ctx, xdp, 0, h, sizeof(h));
	} else {
		__u8 h[sizeof(struct ethhdr) + sizeof(struct ipv6hdr)];

		return ctx_load(ctx, xdp, DSR_HDR6_LEN, h, sizeof(h)) || ctx_store(ctx, xdp, 0, h, sizeof(h));
	}
}

/* dsr_encode writes frontend fe:port into packet f (translated already;
 * l4_off as parsed: the base header alone, lb_dsr_wanted). f's offsets
 * past the IP header are stale afterwards. 0, or -1. */
static always_inline int dsr_encode(void *ctx, int xdp, const struct flow *f, const struct nc_addr *fe, __be16 port)
{
	if (dsr_make_room(ctx, xdp, f->family))
		return -1;
	if (f->family == 4) {
		struct dsr_opt4 o = {.type = DSR_OPT4_TYPE, .len = DSR_OPT4_LEN, .port = port, .addr = fe->w[3]};
		__u8 w[4], n[4]; /* version + IHL, TOS, total length */
		__s64 diff;

		if (ctx_load(ctx, xdp, L3_OFF, w, 4))
			return -1;
		n[0] = w[0] + DSR_OPT4_LEN / 4;
		n[1] = w[1];
		*(__be16 *)&n[2] = bpf_htons(bpf_ntohs(*(__be16 *)&w[2]) + DSR_OPT4_LEN);
		/* The header checksum covers the option too. */
		diff = bpf_csum_diff((__be32 *)w, 4, (__be32 *)n, 4, 0);
		if (diff < 0)
			return -1;
		diff = bpf_csum_diff(NULL, 0, (__be32 *)&o, sizeof(o), (__u32)diff);
		return ctx_store(ctx, xdp, L3_OFF, n, 4) ||
		       ctx_store(ctx, xdp, L3_OFF + sizeof(struct iphdr), &o, sizeof(o)) ||
		       ctx_csum_diff(ctx, xdp, L3_OFF + offsetof(struct iphdr, check), diff, 0);
	} else {
		struct dsr_hdr6 h = {.nexthdr = f->proto, .hdrlen = DSR_HDR6_LEN / 8 - 1, .type = DSR_OPT6_TYPE,
				     .len = DSR_OPT6_LEN, .port = port};
		__u8 next = IPPROTO_DSTOPTS;
		__be16 plen;

		__builtin_memcpy(h.addr, fe->w, 16);
		/* Neither changes the L4 checksum: its pseudo-header has the
		 * L4 length and protocol, not the IPv6 header's. */
		if (ctx_load(ctx, xdp, L3_OFF + offsetof(struct ipv6hdr, payload_len), &plen, 2))
			return -1;
		plen = bpf_htons(bpf_ntohs(plen) + DSR_HDR6_LEN);
		return ctx_store(ctx, xdp, L3_OFF + offsetof(struct ipv6hdr, payload_len), &plen, 2) ||
		       ctx_store(ctx, xdp, L3_OFF + offsetof(struct ipv6hdr, nexthdr), &next, 1) ||
		       ctx_store(ctx, xdp, L3_OFF + sizeof(struct ipv6hdr), &h, sizeof(h));
	}
}

/* dsr_record keeps the frontend that DSR packet f (f->dsr, for a pod of
 * this node, from a node of the cluster: the caller's) carries as its
 * flow's reply entry, so the pod's replies leave from the frontend,
 * straight to the client (xlate.h). A flow already recorded with it is
 * left as it is, unless f reopens it. 0; -1: the frontend unreadable, or
 * the entry not written (counted); DSR_CONFLICT: the reply key is a live
 * flow's that is no DSR flow (a pod's own connection, say), which a DSR
 * packet never takes over. */
#define DSR_CONFLICT 1
static always_inline int dsr_record(struct __sk_buff *skb, const struct flow *f)
{
	struct ct_scratch *s = ct_scratch_area();
	struct nc_addr fe;
	struct ct_entry *e;
	__be16 port;

	if (!s)
		return -1;
	if (f->family == 4) {
		struct dsr_opt4 o;

		if (bpf_skb_load_bytes(skb, L3_OFF + sizeof(struct iphdr), &o, sizeof(o)))
			return -1;
		addr_from_v4(&fe, o.addr);
		port = o.port;
	} else {
		if (bpf_skb_load_bytes(skb, L3_OFF + sizeof(struct ipv6hdr) + offsetof(struct dsr_hdr6, port), &port, 2) ||
		    bpf_skb_load_bytes(skb, L3_OFF + sizeof(struct ipv6hdr) + offsetof(struct dsr_hdr6, addr), fe.w, 16))
			return -1;
	}
	ct_reply_key(&s->key, &f->daddr, f->dport, &f->saddr, f->sport, f->proto);
	e = bpf_map_lookup_elem(&ct_flows, &s->key);
	if (e && (e->flags & CT_F_DSR) && addr_equal(&e->nat_addr, &fe) && e->nat_port == port &&
	    !ct_reopens(f, e) && !ct_expired(e, f->proto, nc_now())) {
		mon_crossed(MON_CUBE_CT);
		return 0;
	}
	if (e && !(e->flags & CT_F_DSR) && !ct_expired(e, f->proto, nc_now()))
		return DSR_CONFLICT;
	__builtin_memset(&s->entry, 0, sizeof(s->entry));
	s->entry.last_ns = nc_now();
	s->entry.flags = CT_F_EXTERNAL | CT_F_DSR | CT_F_HANDSHAKE;
	s->entry.nat_addr = fe;
	s->entry.nat_port = port;
	if (ct_insert(&s->key, &s->entry)) {
		ct_count(CT_STAT_INSERT_FAILED);
		return -1;
	}
	ct_note_unanswered(&s->key);
	ct_count(CT_STAT_CREATED);
	mon_crossed(MON_CUBE_CT);
	return 0;
}
