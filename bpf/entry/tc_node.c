/* tc_node.c: Services reached from outside the cluster through this node
 * (NodePort on the node's addresses, ExternalIPs, LoadBalancer IPs), on the
 * node's uplink (tcx ingress):
 *   a reply of such a flow (from a backend on another node, to this node's
 *   SNAT address)            -> conntrack -> reverse NAT -> back to the client
 *   a packet to an external frontend -> conntrack -> LB -> DNAT (+ SNAT to
 *   this node for externalTrafficPolicy Cluster; or, with --nodeport-mode
 *   dsr|hybrid and a backend on another node, the frontend written into
 *   the packet instead: cubes/lb/dsr.h) -> the backend's next hop
 *   a DSR packet for a pod of this node -> its frontend kept for the
 *   pod's replies, which leave from it straight to the client
 * A packet for a pod of this node goes straight into it (router.h); an
 * ICMP echo reply or error answering a pod's masqueraded flow goes back to
 * the pod (xlate_icmp.h); an ARP request or IPv6 neighbour solicitation
 * for a LoadBalancer IP this node announces is answered (announce.h);
 * everything else passes untouched. Replies from a backend on this node
 * leave through its pod's veth, where from_pod translates them back
 * (xlate.h, shared with from_pod); those of the node itself as a backend
 * (a host-network endpoint) through the uplink, where to_net (egress) does.
 */
#include <linux/if_packet.h>
#include "xlate.h"
#include "xlate_icmp.h"
#include "cubes/lb/announce.h"
#include "cubes_gen.h"

/* forward_dsr sends packet f of a DSR flow to its backend on another node
 * (x): DNATed, its frontend written in when it carries it (dsr.h), the
 * client kept as its source. */
static always_inline int forward_dsr(struct __sk_buff *skb, const struct flow *f, const struct xlate *x)
{
	if (nat_rewrite(skb, f, NAT_DST, &x->backend->addr, x->backend->port))
		return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
	if (dsr_carries(f) &&
	    ((f->proto == IPPROTO_TCP && dsr_clamp_mss(skb, 0, f)) || dsr_encode(skb, 0, f, &f->daddr, f->dport)))
		return mon_drop(skb, f, MON_DROP_NAT_REWRITE);
	return router_to_node(skb, f->family, &f->saddr, &x->backend->addr, 0, -1);
}

static always_inline int handle_from_net(struct __sk_buff *skb)
{
	struct flow f = {.point = MON_AT_FROM_NET};
	struct xlate x = {};
	struct ct_entry *reply;
	struct lb_svc_val *svc;
	const struct nc_addr *node;
	int verdict;

	if (parse_flow(skb, &f)) {
		/* Not TCP, UDP or SCTP: maybe someone on the link asking
		 * for a LoadBalancer IP this node serves. */
		verdict = lb_answer_neighbour(skb);
		if (verdict != CUBE_PASS)
			return verdict;
		return xlate_icmp_from_net(skb);
	}
	verdict = cubes_from_net(skb, &f);
	if (verdict != CUBE_PASS)
		return verdict;
	reply = ct_lookup(&f, CT_REPLY); /* once: for xlate_reply and xlate_deliver */
	if (xlate_reply(skb, &f, reply, &verdict, 0))
		return verdict;
	/* A DSR flow's packet for a pod of this node: its frontend kept,
	 * for the pod's replies (cubes/lb/dsr.h); honoured only with DSR on
	 * and from another node of the cluster (else anyone who reaches a
	 * pod's address could make it answer from an address they chose). */
	if (f.dsr && router_endpoint(&f.daddr)) {
		if (lb_nodeport == LB_NODEPORT_SNAT || !router_from_node(skb))
			return mon_drop(skb, &f, MON_DROP_DSR_UNTRUSTED);
		verdict = dsr_record(skb, &f);
		if (verdict == DSR_CONFLICT)
			return mon_drop(skb, &f, MON_DROP_DSR_UNTRUSTED);
		if (verdict)
			return mon_drop(skb, &f, MON_DROP_CT_CREATE);
	}

	svc = lb_lookup_service(&f.daddr, f.dport, f.proto);
	if (!svc || !(svc->flags & LB_SVC_EXTERNAL)) {
		/* Another node's pod (native routing) reaching one of ours. */
		const struct router_endpoint *ep = router_endpoint(&f.daddr);

		if (ep)
			return xlate_deliver(skb, &f, ep, reply, 0);
		return TC_ACT_OK;
	}
	if (!lb_source_allowed(svc, &f.saddr))
		return mon_drop(skb, &f, MON_DROP_SOURCE_RANGE);

	if (!xlate_established(&f, &x)) {
		__u8 flags = 0;

		verdict = xlate_pick(skb, &f, svc, &x);
		if (!x.backend)
			return verdict;
		if (is_node_addr(&x.backend->addr, f.family)) {
			/* The backend is this node (a host-network pod): its
			 * stack answers the client directly, through to_net. */
			flags = CT_F_HOST;
		} else if (!(svc->flags & LB_SVC_LOCAL) && lb_dsr_wanted(&f) && !router_local_pod(&x.backend->addr)) {
			/* Cluster, DSR: the backend's node answers the client. */
			flags = CT_F_DSR;
			x.dsr = 1;
		} else if (!(svc->flags & LB_SVC_LOCAL) && !router_local_pod(&x.backend->addr)) {
			/* Cluster, a backend on another node: SNAT to this
			 * node, so the reply comes back here. One on this node
			 * replies through this node anyway, and keeps the
			 * client as its source (as Local does), so its ingress
			 * policy judges the real client. */
			node = node_addr(f.family);
			if (!node)
				return mon_drop(skb, &f, MON_DROP_NO_NODE_ADDR);
			xlate_snat(&f, node, &x);
			if (!x.sport)
				return mon_drop(skb, &f, MON_DROP_SNAT_NO_PORT);
			flags = CT_F_SNAT;
		}
		if (ct_create_external(&f, x.backend_id, &x.backend->addr, x.backend->port,
				       svc->rev_nat_id, flags, &x.snat, x.sport))
			return mon_drop(skb, &f, MON_DROP_CT_CREATE);
		xlate_trace_new(skb, &f, svc, &x);
	}
	if (x.dsr)
		return forward_dsr(skb, &f, &x);
	return xlate_forward(skb, &f, &x, 0);
}

/* to_net (tcx egress of the uplink): the cubes' hooks, then the node's
 * own replies as the backend of a flow from outside (CT_F_HOST) get their
 * frontend back as source. Everything else leaves untouched. */
static always_inline int handle_to_net(struct __sk_buff *skb)
{
	struct flow f = {.point = MON_AT_TO_NET};
	int verdict;

	if (parse_flow(skb, &f))
		return TC_ACT_OK;
	verdict = cubes_to_net(skb, &f);
	if (verdict != CUBE_PASS)
		return verdict;
	if (xlate_revnat(skb, &f, CT_F_HOST))
		return mon_drop(skb, &f, MON_DROP_NAT_REWRITE);
	return TC_ACT_OK;
}

SEC("tcx/ingress")
int from_net(struct __sk_buff *skb)
{
	__u32 len;

	/* A frame to another host's MAC (PACKET_OTHERHOST: a bridge or
	 * switch flooding one for a MAC it does not know, as for a dead
	 * node's until it ages out; a promiscuous uplink) is not this
	 * node's to serve, even when its address is one this node serves
	 * too: a LoadBalancer IP another node was elected to announce would
	 * be served twice. It goes to the kernel untouched, which drops it
	 * (ip_rcv, ipv6_rcv), as a NIC's MAC filter would have. Broadcast
	 * and multicast frames (ARP requests, neighbour solicitations) are
	 * this host's (PACKET_BROADCAST, PACKET_MULTICAST). */
	if (skb->pkt_type == PACKET_OTHERHOST)
		return TC_ACT_OK;
	len = mon_cubes_begin(skb, MON_AT_FROM_NET);
	return mon_cubes_end(skb, handle_from_net(skb), len);
}

SEC("tcx/egress")
int to_net(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb, MON_AT_TO_NET);

	return mon_cubes_end(skb, handle_to_net(skb), len);
}
