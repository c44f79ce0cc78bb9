/* xlate_icmp.h: ICMP and ICMPv6 through the cubes (lib/icmp.h reads them).
 *   A pod's echo request to outside the cluster is masqueraded as a UDP
 *   flow would be, its identifier the port (xlate_masquerade: conntrack
 *   holds it, and a free identifier is found when another pod's is
 *   taken); the reply comes back through xlate_reply, as any masqueraded
 *   flow's answer does.
 *   An error answering a masqueraded flow (to this node's address, on the
 *   uplink: from_net) goes back to the pod: its destination, and the
 *   quoted packet's source and port, translated back. So PMTU discovery
 *   (fragmentation needed, packet too big) and traceroute (time exceeded,
 *   port unreachable) work from a pod.
 *   An error answering a Service flow a pod opened through the tc path (to
 *   the pod: to_pod) quotes the backend: the quote's destination goes back
 *   to the frontend the pod's socket knows, and so does the error's source
 *   when the backend itself sent it (a router on the way keeps its own
 *   address, for traceroute).
 * An error is translated only when its quote names a live flow of the
 * right kind; anything else passes as it is, counted (nat_icmp_stats).
 * The quoted packet's own TCP/UDP checksum is left as it was: a receiver
 * matches an error to its socket by addresses and ports (Linux's ICMP
 * handlers do) and never verifies it, and the quote is often cut short
 * before it.
 */
#pragma once
#include "lib/icmp.h"
#include "xlate.h"

/* icmp_csum_add folds the change of size bytes (4 or 16) from old to new
 * into error e's checksum; pseudo: the bytes are covered by ICMPv6's
 * pseudo-header (the outer addresses), not by the message. */
static always_inline int icmp_csum_add(struct __sk_buff *skb, const struct flow *e, __u32 *old, __u32 *new,
				       __u32 size, int pseudo)
{
	__s64 diff = bpf_csum_diff(old, size, new, size, 0);

	if (diff < 0)
		return -1;
	return bpf_l4_csum_replace(skb, l4_csum_off(e), 0, (__u32)diff, pseudo ? BPF_F_PSEUDO_HDR : 0);
}

/* icmp_set_outer rewrites error e's own source or destination (side) to
 * a. IPv4: its header checksum; IPv6: ICMPv6's pseudo-header. */
static always_inline int icmp_set_outer(struct __sk_buff *skb, const struct flow *e, int side,
					const struct nc_addr *a)
{
	struct nc_addr old = side == NAT_DST ? e->daddr : e->saddr, new = *a;

	if (e->family == 4) {
		__u32 off = L3_OFF + (side == NAT_DST ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));

		return bpf_l3_csum_replace(skb, L3_OFF + offsetof(struct iphdr, check), old.w[3], new.w[3], 4) ||
		       bpf_skb_store_bytes(skb, off, &new.w[3], 4, 0);
	}
	return icmp_csum_add(skb, e, old.w, new.w, 16, 1) ||
	       bpf_skb_store_bytes(skb, L3_OFF + (side == NAT_DST ? offsetof(struct ipv6hdr, daddr)
								  : offsetof(struct ipv6hdr, saddr)),
				   new.w, 16, 0);
}

/* icmp_set_quote rewrites the source or destination (side) of the packet
 * error e quotes to a:port (an echo: its identifier), and e's checksum,
 * which covers the quote; IPv4: the quote's header checksum too. */
static always_inline int icmp_set_quote(struct __sk_buff *skb, const struct flow *e, const struct icmp_quote *q,
					int side, const struct nc_addr *a, __be16 port)
{
	struct nc_addr old = side == NAT_DST ? q->f.daddr : q->f.saddr, new = *a;
	__be16 old_port = side == NAT_DST ? q->f.dport : q->f.sport;
	__u32 csum = l4_csum_off(e);

	if (e->family == 4) {
		__u32 off = q->ip_off + (side == NAT_DST ? offsetof(struct iphdr, daddr) : offsetof(struct iphdr, saddr));
		__u32 check_off = q->ip_off + offsetof(struct iphdr, check);
		__u16 check_old, check_new;

		if (bpf_skb_load_bytes(skb, check_off, &check_old, 2) ||
		    bpf_l3_csum_replace(skb, check_off, old.w[3], new.w[3], 4) ||
		    bpf_skb_load_bytes(skb, check_off, &check_new, 2) ||
		    bpf_l4_csum_replace(skb, csum, old.w[3], new.w[3], 4) ||
		    bpf_l4_csum_replace(skb, csum, check_old, check_new, 2) ||
		    bpf_skb_store_bytes(skb, off, &new.w[3], 4, 0))
			return -1;
	} else if (icmp_csum_add(skb, e, old.w, new.w, 16, 0) ||
		   bpf_skb_store_bytes(skb, q->ip_off + (side == NAT_DST ? offsetof(struct ipv6hdr, daddr)
									: offsetof(struct ipv6hdr, saddr)),
				       new.w, 16, 0)) {
		return -1;
	}
	if (port == old_port)
		return 0;
	return bpf_l4_csum_replace(skb, csum, old_port, port, 2) ||
	       bpf_skb_store_bytes(skb, q->port_off + (side == NAT_DST ? 2 : 0), &port, 2, 0);
}

/* icmp_quoted_flow reads the quote of error e and returns the reply entry
 * of the flow it belongs to (live), or NULL, counted. */
static always_inline struct ct_entry *icmp_quoted_flow(struct __sk_buff *skb, const struct flow *e,
						       struct icmp_quote *q)
{
	struct ct_entry *ct;
	struct ct_key k;
	int r = icmp_quote(skb, e, q);

	if (r != ICMP_QUOTE_OK) {
		nat_icmp_count(r == ICMP_QUOTE_SHORT ? NAT_ICMP_ERR_SHORT : NAT_ICMP_ERR_UNTRACKED);
		return NULL;
	}
	/* The quoted packet went one way; its flow's reply entry is keyed
	 * the other way. */
	ct_reply_key(&k, &q->f.daddr, q->f.dport, &q->f.saddr, q->f.sport, q->f.proto);
	ct = bpf_map_lookup_elem(&ct_flows, &k);
	if (!ct || ct_expired(ct, q->f.proto, nc_now())) {
		nat_icmp_count(NAT_ICMP_ERR_UNTRACKED);
		return NULL;
	}
	return ct;
}

/* xlate_icmp_error_masq sends error e, to this node's address, back to the
 * pod whose masqueraded flow it answers; anything else passes. */
static always_inline int xlate_icmp_error_masq(struct __sk_buff *skb, struct flow *e)
{
	const struct router_endpoint *ep;
	struct icmp_quote q = {};
	struct ct_entry *ct = icmp_quoted_flow(skb, e, &q);
	struct nc_addr pod, node, masq;
	__be16 port, masq_port;
	int allowed;

	if (!ct)
		return TC_ACT_OK;
	if (!(ct->flags & CT_F_MASQ) || !addr_equal(&e->daddr, &q.f.saddr)) {
		nat_icmp_count(NAT_ICMP_ERR_UNTRACKED);
		return TC_ACT_OK;
	}
	pod = ct->nat_addr;
	port = ct->nat_port;
	/* The pod's ingress policy judges the error as it will arrive: to the
	 * pod, about the pod's own packet (untranslated); e and the quote are
	 * set so for it, and back (the stack has no room for copies). */
	node = e->daddr;
	masq = q.f.saddr;
	masq_port = q.f.sport;
	e->daddr = pod;
	q.f.saddr = pod;
	q.f.sport = port;
	allowed = pol_check_quoted(skb, e, &q.f, POL_INGRESS);
	e->daddr = node;
	q.f.saddr = masq;
	q.f.sport = masq_port;
	if (!allowed)
		return TC_ACT_SHOT;
	/* icmp_quote bounded every offset written: a helper fails here only
	 * when the kernel cannot make the packet writable. */
	if (icmp_set_outer(skb, e, NAT_DST, &pod) || icmp_set_quote(skb, e, &q, NAT_SRC, &pod, port)) {
		nat_icmp_count(NAT_ICMP_ERR_BAD);
		return mon_drop(skb, e, MON_DROP_NAT_REWRITE);
	}
	nat_icmp_count(NAT_ICMP_ERR_XLATED);
	ep = router_endpoint(&pod);
	if (ep)
		return router_to_endpoint(skb, ep, 0); /* from_net: a tc ingress */
	return redirect_to_next_hop(skb, e->family, &e->saddr, &pod);
}

/* xlate_icmp_error_service turns error e, to a pod, about a Service flow
 * the pod opened through the tc path (its quote: pod -> backend) into one
 * about the frontend its socket knows; anything else passes. */
static always_inline int xlate_icmp_error_service(struct __sk_buff *skb, const struct flow *e)
{
	struct icmp_quote q = {};
	struct ct_entry *ct = icmp_quoted_flow(skb, e, &q);
	struct lb_frontend *fe;
	struct nc_addr backend;

	if (!ct)
		return TC_ACT_OK;
	/* A flow SNATed or masqueraded has another source than the pod. */
	fe = (ct->flags & (CT_F_SNAT | CT_F_MASQ)) ? NULL : lb_lookup_revnat(ct->rev_nat_id);
	if (!fe || !addr_equal(&e->daddr, &q.f.saddr)) {
		nat_icmp_count(NAT_ICMP_ERR_UNTRACKED);
		return TC_ACT_OK;
	}
	backend = q.f.daddr;
	if (icmp_set_quote(skb, e, &q, NAT_DST, &fe->addr, fe->port) ||
	    (addr_equal(&e->saddr, &backend) && icmp_set_outer(skb, e, NAT_SRC, &fe->addr))) {
		nat_icmp_count(NAT_ICMP_ERR_BAD);
		return mon_drop(skb, e, MON_DROP_NAT_REWRITE);
	}
	nat_icmp_count(NAT_ICMP_ERR_XLATED);
	return TC_ACT_OK;
}

/* xlate_icmp_masq_wanted says whether echo request f, from a pod, goes
 * outside the cluster masqueraded. */
static always_inline int xlate_icmp_masq_wanted(const struct flow *f)
{
	return !router_endpoint(&f->daddr) && !router_remote_node(&f->daddr) && masq_wanted(&f->daddr);
}

/* xlate_icmp_from_pod masquerades echo request f (parse_icmp's), a pod's
 * to outside the cluster (xlate_icmp_masq_wanted), once its egress policy
 * allows it as any flow. */
static always_inline int xlate_icmp_from_pod(struct __sk_buff *skb, struct flow *f)
{
	int verdict;

	if (!pol_check(skb, f, POL_EGRESS))
		return TC_ACT_SHOT;
	verdict = xlate_masquerade(skb, f);
	if (verdict != TC_ACT_SHOT)
		nat_icmp_count(NAT_ICMP_ECHO_MASQ);
	return verdict;
}

/* xlate_icmp_from_net: the answers to masqueraded flows (an echo reply, an
 * error) back to their pods; the rest to the kernel. */
static always_inline int xlate_icmp_from_net(struct __sk_buff *skb)
{
	struct flow f = {.point = MON_AT_FROM_NET};
	int verdict;

	switch (parse_icmp(skb, &f)) {
	case ICMP_MSG_ECHO_REPLY:
		if (xlate_reply(skb, &f, ct_lookup(&f, CT_REPLY), &verdict, 0))
			return verdict;
		return TC_ACT_OK;
	case ICMP_MSG_ERROR:
		return xlate_icmp_error_masq(skb, &f);
	}
	return TC_ACT_OK;
}

/* xlate_icmp_to_pod: error e (parse_icmp's), to a pod: about a Service
 * flow of the pod, translated to its frontend; anything else as it is. */
static always_inline int xlate_icmp_to_pod(struct __sk_buff *skb, const struct flow *e)
{
	return xlate_icmp_error_service(skb, e);
}
