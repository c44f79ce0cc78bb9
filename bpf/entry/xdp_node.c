/* xdp_node.c: Services reached from outside the cluster, at the earliest
 * point: XDP on the node's uplink (the agent's --nodeport-acceleration=xdp),
 * before the kernel makes an skb of the frame.
 *   a packet to an external frontend (NodePort, ExternalIP, LoadBalancer
 *   IP) whose backend is a pod of another node -> conntrack -> LB -> DNAT
 *   + SNAT to this node (or, with --nodeport-mode dsr|hybrid, the
 *   frontend written in: cubes/lb/dsr.h) -> back out of the uplink
 *   (XDP_TX)
 *   a client outside the frontend's loadBalancerSourceRanges, or a new
 *   flow to a Local frontend with no endpoint on this node -> dropped
 * A frame to another host's MAC is passed untouched (xdp_for_this_host).
 * Everything else passes to from_net (tc_node.c), untouched and with
 * nothing recorded, which handles it as it would without XDP: replies (of
 * the flows XDP sent too), fragments, IPv6 extension headers, SCTP,
 * backends on this node or the node itself, a frontend without endpoints
 * (refused there, with a TCP RST or an ICMP error), the overlay (VXLAN
 * routing), and a next hop out of another interface or not yet resolved.
 * Both programs read and write the same conntrack entries, so a flow
 * begun in one goes on in the other.
 * No cube has a from_net hook (cubes_gen.h); one that gets one must be
 * called here too, or this program must pass what it would see. */
#include "xlate.h"
#include "lib/parse_xdp.h"
#include "cubes/nat/nat_xdp.h"
#include "cubes/monitor/monitor_xdp.h"

/* xdp_backend_elsewhere says whether the backend at a is a pod of another
 * node that the underlay reaches (not through the overlay): the one case
 * XDP forwards. */
static always_inline int xdp_backend_elsewhere(const struct nc_addr *a, __u8 family)
{
	const struct router_conf *cfg = router_cfg();

	if (router_endpoint(a) || is_node_addr(a, family))
		return 0;
	if (cfg && cfg->mode == ROUTER_VXLAN && router_remote_node(a))
		return 0;
	return 1;
}

/* xdp_next_hop looks up the next hop of saddr -> daddr in the FIB (into
 * *p): 0 when it is known and out of the interface the packet came in on,
 * so XDP_TX reaches it. */
static always_inline int xdp_next_hop(struct xdp_md *ctx, __u8 family, const struct nc_addr *saddr,
				      const struct nc_addr *daddr, struct bpf_fib_lookup *p)
{
	p->ifindex = ctx->ingress_ifindex;
	if (family == 4) {
		p->family = AF_INET;
		p->ipv4_src = saddr->w[3];
		p->ipv4_dst = daddr->w[3];
	} else {
		p->family = AF_INET6;
		__builtin_memcpy(p->ipv6_src, saddr->w, 16);
		__builtin_memcpy(p->ipv6_dst, daddr->w, 16);
	}
	if (bpf_fib_lookup(ctx, p, sizeof(*p), 0) != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	return p->ifindex == ctx->ingress_ifindex ? 0 : -1;
}

/* xdp_forward rewrites f to the backend (x) from this node's SNAT
 * address, or for DSR from the client still, its frontend written in when
 * it carries it (cubes/lb/dsr.h), and sends it back out to the next hop
 * p. */
static always_inline int xdp_forward(struct xdp_md *ctx, const struct flow *f, const struct xlate *x,
				     const struct bpf_fib_lookup *p)
{
	const struct nc_addr *saddr = x->dsr ? &f->saddr : &x->snat;
	void *data, *end;
	struct ethhdr *eth;

	if (nat_rewrite_xdp(ctx, f, saddr, x->dsr ? f->sport : x->sport, &x->backend->addr, x->backend->port))
		return mon_xdp_drop(ctx, f, MON_DROP_NAT_REWRITE);
	if (x->dsr && dsr_carries(f) &&
	    ((f->proto == IPPROTO_TCP && dsr_clamp_mss(ctx, 1, f)) || dsr_encode(ctx, 1, f, &f->daddr, f->dport)))
		return mon_xdp_drop(ctx, f, MON_DROP_NAT_REWRITE);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > end)
		return mon_xdp_drop(ctx, f, MON_DROP_MALFORMED);
	__builtin_memcpy(eth->h_dest, p->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, p->smac, ETH_ALEN);
	mon_routed(MON_RT_FIB, p->ifindex, NULL);
	return XDP_TX;
}

/* xdp_trace_new reports a new flow XDP sent: its backend, its SNAT source
 * (none for DSR) and its route, as from_net reports its own (MON_F_TRACE). */
static always_inline void xdp_trace_new(struct xdp_md *ctx, const struct flow *f, const struct lb_svc_val *svc,
					const struct xlate *x, __u32 ifindex)
{
	struct flow out = *f;

	if (!mon_wanted(MON_F_TRACE))
		return;
	mon_xdp_trace_xlate(ctx, f, MON_TR_LB, &x->backend->addr, x->backend->port, svc->rev_nat_id);
	if (!x->dsr) {
		mon_xdp_trace_xlate(ctx, f, MON_TR_SNAT, &x->snat, x->sport, svc->rev_nat_id);
		out.saddr = x->snat;
		out.sport = x->sport;
	}
	out.daddr = x->backend->addr;
	out.dport = x->backend->port;
	mon_xdp_trace_route(ctx, &out, ifindex);
}

/* xdp_for_this_host says whether the frame is this host's: broadcast or
 * multicast (ARP requests, neighbour solicitations), or unicast to the
 * uplink's own MAC (lb_uplinks). A frame to another host's MAC (a bridge
 * or switch flooding one for a MAC it does not know, as for a dead node's
 * until it ages out; a promiscuous uplink) is not this node's to serve,
 * even to an address this node serves too: a LoadBalancer IP another node
 * was elected to announce would be served twice. Passed untouched, from_net
 * leaves it too (PACKET_OTHERHOST) and the kernel drops it (ip_rcv). */
static always_inline int xdp_for_this_host(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 ifindex = ctx->ingress_ifindex;
	const struct lb_uplink *u;
	struct ethhdr *eth = data;
	__u8 diff = 0;

	if ((void *)(eth + 1) > end)
		return 0;
	if (eth->h_dest[0] & 1) /* the group bit: broadcast, multicast */
		return 1;
	u = bpf_map_lookup_elem(&lb_uplinks, &ifindex);
	if (!u)
		return 0;
#pragma unroll
	for (int i = 0; i < ETH_ALEN; i++)
		diff |= eth->h_dest[i] ^ u->mac[i];
	return !diff;
}

static always_inline int handle_xdp_from_net(struct xdp_md *ctx)
{
	struct flow f = {.point = MON_AT_XDP_FROM_NET};
	struct bpf_fib_lookup p = {};
	struct xlate x = {};
	const struct nc_addr *node;
	struct lb_svc_val *svc;
	struct ct_entry *ct;

	if (!xdp_for_this_host(ctx) || parse_flow_xdp(ctx, &f))
		return XDP_PASS;
	svc = lb_lookup_service(&f.daddr, f.dport, f.proto);
	if (!svc || !(svc->flags & LB_SVC_EXTERNAL))
		return XDP_PASS;
	/* On a port SNAT and masquerading hand out, a reply may reach an
	 * address a frontend shares: from_net looks for replies first. */
	if (bpf_ntohs(f.dport) >= SNAT_PORT_MIN)
		return XDP_PASS;
	if (!lb_source_allowed(svc, &f.saddr))
		return mon_xdp_drop(ctx, &f, MON_DROP_SOURCE_RANGE);

	ct = ct_lookup(&f, CT_SERVICE);
	if (svc->flags & LB_SVC_LOCAL) {
		/* Its endpoints are this node's pods: from_net delivers into
		 * them, and carries on the flows of one that is terminating. */
		if (svc->count == 0 && !ct)
			return mon_xdp_drop(ctx, &f, MON_DROP_NO_LOCAL_ENDPOINT);
		return XDP_PASS;
	}
	if (ct) {
		/* Decided before anything is recorded: what XDP passes, tc
		 * must find as it was. */
		x.backend = lb_lookup_backend(ct->backend_id);
		if (!x.backend || !(ct->flags & (CT_F_SNAT | CT_F_DSR)) || !xdp_backend_elsewhere(&x.backend->addr, f.family) ||
		    xdp_next_hop(ctx, f.family, (ct->flags & CT_F_SNAT) ? &ct->nat_addr : &f.saddr, &x.backend->addr, &p))
			return XDP_PASS;
		if (xlate_established_entry(&f, ct, &x))
			return xdp_forward(ctx, &f, &x, &p);
		/* Stale (timed out, half gone, a SYN reusing the port): a new
		 * flow, as from_net would make it. */
	}

	if (svc->count == 0)
		return XDP_PASS; /* refused by from_net */
	x.backend_id = lb_pick(&f.saddr, f.sport, &f.daddr, f.dport, f.proto, svc);
	x.backend = x.backend_id ? lb_lookup_backend(x.backend_id) : NULL;
	if (!x.backend || !xdp_backend_elsewhere(&x.backend->addr, f.family))
		return XDP_PASS;
	x.dsr = lb_dsr_wanted(&f);
	if (x.dsr) {
		x.snat = f.saddr; /* the source stays the client's */
	} else {
		node = node_addr(f.family);
		if (!node)
			return XDP_PASS;
		xlate_snat(&f, node, &x);
		if (!x.sport)
			return mon_xdp_drop(ctx, &f, MON_DROP_SNAT_NO_PORT);
	}
	__builtin_memset(&p, 0, sizeof(p));
	if (xdp_next_hop(ctx, f.family, &x.snat, &x.backend->addr, &p))
		return XDP_PASS;
	if (ct_create_external(&f, x.backend_id, &x.backend->addr, x.backend->port, svc->rev_nat_id,
			       x.dsr ? CT_F_DSR : CT_F_SNAT, &x.snat, x.sport))
		return mon_xdp_drop(ctx, &f, MON_DROP_CT_CREATE);
	xdp_trace_new(ctx, &f, svc, &x, p.ifindex);
	return xdp_forward(ctx, &f, &x, &p);
}

SEC("xdp")
int xdp_from_net(struct xdp_md *ctx)
{
	__u32 len = mon_xdp_begin(ctx);

	return mon_xdp_end(handle_xdp_from_net(ctx), len);
}
