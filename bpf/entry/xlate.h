/* xlate.h: a Service flow's translation, as both tc programs do it: the
 * reply of an external flow translated back; an established flow's backend
 * (and SNAT) from conntrack; a new flow's backend, or the verdict when it
 * has none; the rewrite and where the packet goes next. The programs differ
 * only in which new flows they SNAT, and where to.
 */
#pragma once
#include "lib/parse.h"
#include "lib/reject.h"
#include "lib/fib.h"
#include "cubes/lb/lb.h"
#include "cubes/lb/dsr.h"
#include "cubes/ct/ct.h"
#include "cubes/nat/nat.h"
#include "cubes/nat/node_addr.h"
#include "cubes/nat/snat.h"
#include "cubes/nat/masq.h"
#include "cubes/router/router.h"
#include "cubes/policy/policy.h"
#include "cubes_gen.h"

struct xlate {
	struct lb_backend *backend;
	__u32 backend_id;
	__be16 sport;        /* SNAT source port; 0: no SNAT */
	__u8 dsr;            /* direct server return (cubes/lb/dsr.h) */
	__u8 pad;
	struct nc_addr snat; /* SNAT source address, with sport */
};

/* xlate_admit: whether packet f may enter a pod of this node: its
 * policies, then the cubes' to_pod hooks (a pod's ingress rate). Every
 * way into a pod passes here, the router's redirects (which skip the pod
 * veth's egress) and to_pod alike. CUBE_PASS, or the verdict. */
static always_inline int xlate_admit(struct __sk_buff *skb, const struct flow *f)
{
	if (!pol_check(skb, f, POL_INGRESS))
		return TC_ACT_SHOT;
	return cubes_to_pod(skb, f);
}

/* reply_external sends the reply of an external flow back to its client:
 * source back to the frontend, destination back to the client if it was
 * SNATed, then to the client's next hop. A DSR flow's reply leaves the
 * backend's node so, never having passed the frontend's. */
static always_inline int reply_external(struct __sk_buff *skb, const struct flow *f,
					const struct ct_entry *ct)
{
	const struct nc_addr *from = &ct->nat_addr; /* DSR: the frontend the flow's packets carried here */
	__be16 from_port = ct->nat_port;
	struct nc_addr client = f->daddr;

	if (ct->flags & CT_F_DSR) {
		mon_crossed(MON_CUBE_LB);
	} else {
		struct lb_frontend *fe = lb_lookup_revnat(ct->rev_nat_id);

		if (!fe)
			return TC_ACT_OK;
		from = &fe->addr;
		from_port = fe->port;
		if (ct->flags & CT_F_SNAT) {
			client = ct->nat_addr;
			if (nat_rewrite(skb, f, NAT_DST, &ct->nat_addr, ct->nat_port))
				return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
		}
	}
	if (nat_rewrite(skb, f, NAT_SRC, from, from_port))
		return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
	return redirect_to_next_hop(skb, f->family, from, &client);
}

/* reply_masq sends the reply of a masqueraded flow back to its pod: the
 * destination back to the pod, then into it (or to its node). */
static always_inline int reply_masq(struct __sk_buff *skb, const struct flow *f,
				    const struct ct_entry *ct, const __u8 at_xmit)
{
	const struct router_endpoint *ep;
	struct flow real = *f;

	if (nat_rewrite(skb, f, NAT_DST, &ct->nat_addr, ct->nat_port))
		return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
	ep = router_endpoint(&ct->nat_addr);
	if (ep) {
		real.daddr = ct->nat_addr;
		real.dport = ct->nat_port;
		int v = xlate_admit(skb, &real);

		if (v != CUBE_PASS)
			return v;
		return router_to_endpoint(skb, ep, at_xmit);
	}
	return redirect_to_next_hop(skb, f->family, &f->saddr, &ct->nat_addr);
}

/* xlate_service_entry returns the service entry (key in *k) of the flow
 * whose reply f is, r its reply entry; NULL if it is gone or now another
 * flow's (a reused client port). */
static always_inline struct ct_entry *xlate_service_entry(const struct flow *f, const struct ct_entry *r,
							  struct ct_key *k)
{
	struct ct_entry *s;

	k->proto = f->proto;
	k->dir = CT_SERVICE;
	k->pad = 0;
	if (r->flags & CT_F_SNAT) { /* the client is remembered */
		k->saddr = r->nat_addr;
		k->sport = r->nat_port;
	} else {
		k->saddr = f->daddr;
		k->sport = f->dport;
	}
	if (r->flags & CT_F_MASQ) { /* to outside: the reply's source */
		k->daddr = f->saddr;
		k->dport = f->sport;
	} else {
		struct lb_frontend *fe = lb_lookup_revnat(r->rev_nat_id);

		if (!fe)
			return NULL;
		k->daddr = fe->addr;
		k->dport = fe->port;
	}
	s = bpf_map_lookup_elem(&ct_flows, k);
	if (!s || s->backend_id != r->backend_id || s->rev_nat_id != r->rev_nat_id)
		return NULL;
	return s;
}

/* xlate_track_reply records reply f in its flow's entries (r, and the
 * service entry when it is news, ct_news) and removes a flow it ends.
 * Called once what the packet needed from r has been read. */
static always_inline void xlate_track_reply(const struct flow *f, struct ct_entry *r)
{
	struct ct_key sk, rk;
	struct ct_entry *s = NULL;
	__u64 now = nc_now();

	if (ct_news(r, f, CT_REPLY, now))
		s = xlate_service_entry(f, r, &sk);
	if (ct_observe(r, s, f, CT_REPLY, now)) {
		ct_key_from_flow(&rk, f, CT_REPLY);
		ct_remove(&rk, s ? &sk : NULL);
	}
}

/* xlate_reply says whether f, whose reply entry is ct (ct_lookup(f,
 * CT_REPLY), NULL: none), is the reply of an external or a masqueraded
 * flow; if so it has been sent back to its client, with *verdict. The
 * caller looks ct up once for this and for xlate_deliver, which needs the
 * same entry when the packet is for a pod of this node. */
static always_inline int xlate_reply(struct __sk_buff *skb, const struct flow *f, struct ct_entry *ct,
				     int *verdict, const __u8 at_xmit)
{
	if (!ct)
		return 0;
	if (ct->flags & CT_F_MASQ) {
		*verdict = reply_masq(skb, f, ct, at_xmit);
		xlate_track_reply(f, ct);
		return 1;
	}
	if (!(ct->flags & CT_F_EXTERNAL))
		return 0;
	*verdict = reply_external(skb, f, ct);
	xlate_track_reply(f, ct);
	return 1;
}

/* xlate_masquerade sends a pod's packet to outside the cluster out with
 * this node's address as its source, on a port held for the flow in
 * conntrack (whose reply entry brings the answers back, xlate_reply): a
 * flow's first packet (a TCP SYN, any UDP or SCTP, an ICMP echo request:
 * its identifier is the port) or one of a masqueraded flow. An SCTP
 * association gets a SNAT port as a UDP flow does (its CRC32c follows the
 * new port, nat.h); a port that cannot be held is a drop
 * (MON_DROP_SNAT_NO_PORT), never a clash with another flow's. No node address of
 * the family: the packet goes as it is. This is a routing hop: a packet
 * whose TTL ends here goes to the kernel untranslated, which answers time
 * exceeded (traceroute's first hop); any other leaves with one less. */
static always_inline int xlate_masquerade(struct __sk_buff *skb, const struct flow *f)
{
	struct ct_entry *ct, *r;
	const struct nc_addr *node;
	struct nc_addr snat;
	struct ct_key sk, rk;
	__u64 now = nc_now();
	__be16 port;

	if (ip_ttl_expires(skb, f->family))
		return TC_ACT_OK;
	ct = ct_lookup(f, CT_SERVICE);
	if (ct && (ct->flags & CT_F_MASQ) && ct_established(f, ct, &f->daddr, f->dport, &r, &rk, now)) {
		snat = ct->nat_addr;
		port = ct->nat_port;
		if (ct_observe(ct, r, f, CT_SERVICE, now)) {
			ct_key_from_flow(&sk, f, CT_SERVICE);
			ct_remove(&sk, &rk);
		}
	} else if (!flow_is_new(f)) {
		/* A TCP packet of a connection the pod did not open here: the
		 * reply of one opened from outside (to the pod's address,
		 * routed to this node) goes back from the address it was sent
		 * to, or the client drops it. */
		return redirect_to_next_hop(skb, f->family, &f->saddr, &f->daddr);
	} else {
		node = node_addr(f->family);
		if (!node)
			return redirect_to_next_hop(skb, f->family, &f->saddr, &f->daddr);
		snat = *node;
		port = snat_port(f, &snat, &f->daddr, f->dport);
		if (!port) {
			if (is_icmp(f->proto))
				nat_icmp_count(NAT_ICMP_ECHO_NO_ID);
			return mon_drop(skb, f, MON_DROP_SNAT_NO_PORT);
		}
		if (ct_create_flow(f, 0, &f->daddr, f->dport, 0, CT_F_MASQ | CT_F_SNAT, &snat, port))
			return mon_drop(skb, f, MON_DROP_CT_CREATE);
		mon_trace_xlate(skb, f, MON_TR_MASQ, &snat, port, 0);
	}
	if (nat_rewrite(skb, f, NAT_SRC, &snat, port) || ip_dec_ttl(skb, f->family))
		return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
	return redirect_to_next_hop(skb, f->family, &snat, &f->daddr);
}

/* xlate_established fills x from conntrack when f is an established flow
 * whose backend still exists and whose reply half is still there: it stays
 * on its backend (and its SNAT port). A service entry whose reply entry is
 * gone (forgotten by a direct flow that reused the client port, or evicted)
 * is never trusted: replies would not be translated back, so the flow is
 * treated as new and both halves are written again; so is one timed out,
 * or a SYN reusing the port of an answered flow (ct_established). A packet
 * that ends the flow removes it (ct_observe). xlate_established_entry
 * does it for the flow's service entry ct, already looked up (or NULL). */
static always_inline int xlate_established_entry(const struct flow *f, struct ct_entry *ct, struct xlate *x)
{
	struct ct_entry *r;
	struct ct_key sk, rk;
	__u64 now;

	if (!ct)
		return 0;
	now = nc_now(); /* once per packet: expiry and refresh */
	x->backend = lb_lookup_backend(ct->backend_id);
	if (!x->backend || !ct_established(f, ct, &x->backend->addr, x->backend->port, &r, &rk, now))
		return 0;
	x->backend_id = ct->backend_id;
	x->dsr = !!(ct->flags & CT_F_DSR);
	if (ct->flags & CT_F_SNAT) {
		x->snat = ct->nat_addr;
		x->sport = ct->nat_port;
	}
	if (ct_observe(ct, r, f, CT_SERVICE, now)) {
		ct_key_from_flow(&sk, f, CT_SERVICE);
		ct_remove(&sk, &rk);
	}
	return 1;
}

static always_inline int xlate_established(const struct flow *f, struct xlate *x)
{
	return xlate_established_entry(f, ct_lookup(f, CT_SERVICE), x);
}

/* xlate_pick chooses a new flow's backend (x->backend). Without one
 * (x->backend NULL), it returns the verdict: a Local policy drops (another
 * node may have endpoints, as kube-proxy does), anything else is refused
 * at once (reported as a drop: the packet goes no further). */
static always_inline int xlate_pick(struct __sk_buff *skb, const struct flow *f,
				    const struct lb_svc_val *svc, struct xlate *x)
{
	x->backend_id = lb_pick(&f->saddr, f->sport, &f->daddr, f->dport, f->proto, svc);
	x->backend = x->backend_id ? lb_lookup_backend(x->backend_id) : NULL;
	if (x->backend)
		return TC_ACT_OK;
	if (svc->flags & LB_SVC_LOCAL)
		return mon_drop(skb, f, MON_DROP_NO_LOCAL_ENDPOINT);
	mon_note_drop(skb, f, MON_DROP_NO_ENDPOINTS);
	return reject(skb, f);
}

/* xlate_trace_new reports a new Service flow's translation (MON_F_TRACE):
 * its backend, and its SNAT source if it has one. */
static always_inline void xlate_trace_new(struct __sk_buff *skb, const struct flow *f,
					  const struct lb_svc_val *svc, const struct xlate *x)
{
	mon_trace_xlate(skb, f, MON_TR_LB, &x->backend->addr, x->backend->port, svc->rev_nat_id);
	if (x->sport)
		mon_trace_xlate(skb, f, MON_TR_SNAT, &x->snat, x->sport, svc->rev_nat_id);
}

/* xlate_snat gives a new flow the source addr and a port of it free towards
 * the backend (x->sport stays 0 when none is). */
static always_inline void xlate_snat(const struct flow *f, const struct nc_addr *addr, struct xlate *x)
{
	x->snat = *addr;
	x->sport = snat_port(f, addr, &x->backend->addr, x->backend->port);
}

/* xlate_forward rewrites the packet to the backend (and its SNAT source)
 * and routes it (router.h): into the backend's pod when it is on this
 * node, to this node's own stack when the backend is the node (a
 * host-network endpoint; never SNATed), else on to its node. The kernel's
 * forwarding never gets a SNATed packet: its source is now this node's own
 * address, a "martian" on input. */
static always_inline int xlate_forward(struct __sk_buff *skb, const struct flow *f,
				       const struct xlate *x, const __u8 at_xmit)
{
	const struct router_endpoint *ep;
	struct nc_addr saddr = f->saddr;
	struct flow real = *f; /* the packet as the backend receives it */

	if (x->sport) {
		saddr = x->snat;
		real.saddr = x->snat;
		real.sport = x->sport;
		if (nat_rewrite(skb, f, NAT_SRC, &x->snat, x->sport))
			return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
	}
	if (nat_rewrite(skb, f, NAT_DST, &x->backend->addr, x->backend->port))
		return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
	ep = router_endpoint(&x->backend->addr);
	if (ep) {
		real.daddr = x->backend->addr;
		real.dport = x->backend->port;
		int v = xlate_admit(skb, &real);

		if (v != CUBE_PASS)
			return v;
		return router_to_endpoint(skb, ep, at_xmit);
	}
	if (!x->sport && is_node_addr(&x->backend->addr, f->family))
		return TC_ACT_OK;
	return router_to_node(skb, f->family, &saddr, &x->backend->addr, x->sport != 0, -1);
}

/* xlate_revnat_entry translates the reply f of a Service flow (its reply
 * entry ct, NULL: none, with the flags want) to its client: its source back to the frontend. to_pod
 * does it for packets the kernel delivers to a pod; xlate_deliver for
 * those the router hands to the pod directly; to_net for the node's own
 * replies as a backend (CT_F_HOST). */
static always_inline int xlate_revnat_entry(struct __sk_buff *skb, const struct flow *f, struct ct_entry *ct,
					      __u8 want)
{
	struct lb_frontend *fe;
	int err;

	if (!ct || (ct->flags & want) != want)
		return 0; /* not a reply of a translated flow */
	fe = lb_lookup_revnat(ct->rev_nat_id);
	if (!fe)
		return 0;
	err = nat_rewrite(skb, f, NAT_SRC, &fe->addr, fe->port);
	xlate_track_reply(f, ct);
	return err;
}

/* xlate_revnat: xlate_revnat_entry on f's reply entry, looked up here. */
static always_inline int xlate_revnat(struct __sk_buff *skb, const struct flow *f, __u8 want)
{
	return xlate_revnat_entry(skb, f, ct_lookup(f, CT_REPLY), want);
}

/* xlate_deliver hands an untranslated packet for a pod of this node (ep)
 * to the pod, if its policies allow it, a Service reply translated back
 * first (the redirect skips the pod veth's egress, where to_pod would);
 * reply is f's reply entry, as the caller looked it up (xlate_reply). */
static always_inline int xlate_deliver(struct __sk_buff *skb, const struct flow *f,
				       const struct router_endpoint *ep, struct ct_entry *reply,
				       const __u8 at_xmit)
{
	int v = xlate_admit(skb, f);

	if (v != CUBE_PASS)
		return v;
	if (xlate_revnat_entry(skb, f, reply, 0))
		return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
	return router_to_endpoint(skb, ep, at_xmit);
}
