/* monitor_xdp.h: the monitor cube for the XDP program (xdp_node.c), which
 * has no skb: the same per-cube counters, drops and trace events as the
 * tc programs', where and how long taken from the XDP context. A packet
 * XDP passes on to tc is counted there, not here: each packet is counted
 * once, by the program that decided its fate. */
#pragma once
#include "monitor.h"

static always_inline __u32 mon_xdp_len(struct xdp_md *ctx)
{
	return (__u32)(ctx->data_end - ctx->data);
}

/* mon_xdp_begin: a packet enters the XDP program; returns its length. */
static always_inline __u32 mon_xdp_begin(struct xdp_md *ctx)
{
	__u32 len = mon_xdp_len(ctx);

	mon_cubes_reset(len, MON_AT_XDP_FROM_NET);
	return len;
}

/* mon_xdp_end counts what the program did (monitor_xdp) and, for a packet
 * it forwarded or dropped, the cubes it crossed (MON_F_CUBES); returns
 * the verdict. */
static always_inline int mon_xdp_end(int verdict, __u32 len)
{
	__u32 zero = 0;
	struct mon_config *c;
	struct mon_cubes *m;

	mon_count(&monitor_xdp, verdict == XDP_PASS ? MON_XDP_PASSED :
				verdict == XDP_TX   ? MON_XDP_FORWARDED : MON_XDP_DROPPED);
	if (verdict == XDP_PASS)
		return verdict;
	c = bpf_map_lookup_elem(&monitor_config, &zero);
	if (!c || !(c->flags & MON_F_CUBES))
		return verdict;
	m = bpf_map_lookup_elem(&monitor_cubes, &zero);
	if (m)
		mon_cubes_count(m, len);
	return verdict;
}

/* mon_xdp_drop: an XDP drop site's return value (XDP_DROP), counted by
 * reason and reported as a tc drop is. */
static always_inline int mon_xdp_drop(struct xdp_md *ctx, const struct flow *f, enum mon_drop reason)
{
	struct mon_detail d = {.type = MON_EV_DROP, .drop = reason,
			       .ifindex = ctx->ingress_ifindex, .len = mon_xdp_len(ctx)};

	mon_note_drop_detail(NULL, f, &d);
	return XDP_DROP;
}

/* mon_xdp_trace_xlate: mon_trace_xlate for the XDP program. */
static always_inline void mon_xdp_trace_xlate(struct xdp_md *ctx, const struct flow *f, enum mon_trace what,
					      const struct nc_addr *xaddr, __be16 xport, __u32 svc)
{
	struct mon_detail d = {.type = MON_EV_TRACE, .trace = what, .xaddr = xaddr, .xport = xport, .svc = svc,
			       .ifindex = ctx->ingress_ifindex, .len = mon_xdp_len(ctx)};

	if (mon_wanted(MON_F_TRACE))
		mon_report(NULL, f, f->point, &d);
}

/* mon_xdp_trace_route reports how a flow's first packet, as it left (out:
 * translated), was sent on: back out of ifindex, to the FIB's next hop
 * (MON_TR_ROUTE, as mon_cubes_end reports it for tc). */
static always_inline void mon_xdp_trace_route(struct xdp_md *ctx, const struct flow *out, __u32 ifindex)
{
	struct mon_detail d = {.type = MON_EV_TRACE, .trace = MON_TR_ROUTE, .route = MON_RT_FIB,
			       .out_ifindex = ifindex, .ifindex = ctx->ingress_ifindex, .len = mon_xdp_len(ctx)};

	if (mon_wanted(MON_F_TRACE))
		mon_report(NULL, out, MON_AT_XDP_FROM_NET, &d);
}
