/* tc_pod.c: a pod's host-side veth (tcx): per-packet Service load
 * balancing for the traffic the socket hooks do not translate, and the
 * router for everything the pod sends.
 *   from_pod (ingress of the host veth): the reply of an external flow to
 *            this pod -> translated back (xlate.h); to a Service:
 *            conntrack -> LB -> DNAT, or reject (a pod that is its own
 *            backend, hairpin, is also SNATed to the hairpin address);
 *            then routed: into a pod of this node (a Service reply
 *            translated back first), on to another node (router.h), or,
 *            outside the cluster, masqueraded to this node (masq.h);
 *            an ICMP echo request to outside the cluster is masqueraded
 *            too (xlate_icmp.h); a packet whose ports cannot be read
 *            (ICMP, other protocols): its policy, unparsed.h. First of
 *            all, the packet's source must be the pod's own address
 *            (router_source_ok): a forged one is dropped
 *   to_pod   (egress of the host veth): what the kernel delivers to the
 *            pod: policy (ingress) -> conntrack -> reverse NAT; a packet
 *            without ports (ICMP, other protocols): its policy
 *            (unparsed.h); an ICMP error about a Service flow of the pod:
 *            its quote translated back to the frontend
 * A netkit pod (--pod-device netkit) runs the same two as its device's own
 * programs: from_pod_netkit as the pod transmits (netkit's peer hook, in
 * the pod's transmit path: no backlog pass before the node's datapath),
 * to_pod_netkit as the node transmits to it (the primary hook).
 * NetworkPolicy (cubes/policy) judges what a pod sends once its real
 * destination is known (after the load balancer), and what a pod receives
 * wherever it is handed to it (router_to_endpoint's callers, to_pod).
 */
#include "xlate.h"
#include "unparsed.h"
#include "cubes_gen.h"

static always_inline int handle_from_pod(struct __sk_buff *skb, const __u8 at_xmit)
{
	struct flow f = {.point = MON_AT_FROM_POD}, real;
	struct xlate x = {};
	struct ct_entry *reply;
	struct lb_svc_val *svc;
	struct nc_addr hairpin;
	int verdict, miss;

	miss = parse_flow(skb, &f);
	if (miss == PARSE_NOT_IP)
		return TC_ACT_OK; /* ARP: the node answers for the gateway */
	if (miss == PARSE_MALFORMED)
		return mon_drop(skb, &f, MON_DROP_MALFORMED);
	if (!router_source_ok(skb, f.family, &f.saddr, &f.daddr, link_local_multicast(&f)))
		return mon_drop(skb, &f, MON_DROP_INVALID_SOURCE);
	if (miss)
		return unparsed_from_pod(skb, &f, miss);
	verdict = cubes_from_pod(skb, &f);
	if (verdict != CUBE_PASS)
		return verdict;
	svc = lb_lookup_service_inside(&f.daddr, f.dport, f.proto);
	/* Policy judges what the pod sends to its real destination: now, or
	 * for a Service, once its backend is known. */
	if (!svc && !pol_check(skb, &f, POL_EGRESS))
		return TC_ACT_SHOT;
	reply = ct_lookup(&f, CT_REPLY); /* once: for xlate_reply and xlate_deliver */
	if (xlate_reply(skb, &f, reply, &verdict, at_xmit))
		return verdict;
	if (!svc) { /* not addressed to a Service: routed as it is */
		const struct router_endpoint *ep;
		int remote;

		if (flow_is_new(&f))
			ct_forget_reply(&f);
		ep = router_endpoint(&f.daddr);
		if (ep)
			return xlate_deliver(skb, &f, ep, reply, at_xmit);
		/* Another node's pods are inside the cluster whatever
		 * nat_no_masq says. */
		remote = router_remote_node(&f.daddr) != NULL;
		if (!remote && masq_wanted(&f.daddr))
			return xlate_masquerade(skb, &f);
		return router_to_node(skb, f.family, &f.saddr, &f.daddr, 0, remote);
	}
	if (!lb_source_allowed(svc, &f.saddr))
		return mon_drop(skb, &f, MON_DROP_SOURCE_RANGE);

	if (!xlate_established(&f, &x)) {
		verdict = xlate_pick(skb, &f, svc, &x);
		if (!x.backend)
			return verdict;
		if (addr_equal(&x.backend->addr, &f.saddr)) {
			/* Hairpin: the pod is its own backend. */
			hairpin_addr(&hairpin, f.family);
			xlate_snat(&f, &hairpin, &x);
			if (!x.sport)
				return mon_drop(skb, &f, MON_DROP_SNAT_NO_PORT);
			if (ct_create_external(&f, x.backend_id, &x.backend->addr, x.backend->port,
					       svc->rev_nat_id, CT_F_SNAT, &x.snat, x.sport))
				return mon_drop(skb, &f, MON_DROP_CT_CREATE);
		} else if (ct_create(&f, x.backend_id, &x.backend->addr, x.backend->port, svc->rev_nat_id)) {
			return mon_drop(skb, &f, MON_DROP_CT_CREATE);
		}
		xlate_trace_new(skb, &f, svc, &x);
	}
	real = f;
	real.daddr = x.backend->addr;
	real.dport = x.backend->port;
	if (!pol_check(skb, &real, POL_EGRESS))
		return TC_ACT_SHOT;
	return xlate_forward(skb, &f, &x, at_xmit);
}

static always_inline int handle_to_pod(struct __sk_buff *skb)
{
	struct flow f = {.point = MON_AT_TO_POD};
	int verdict, miss;

	if (skb->mark == HOOK_MARK_VIA_VETH) {
		/* Admitted already, and sent here for the veth's qdisc. */
		skb->mark = 0;
		return TC_ACT_OK;
	}
	miss = parse_flow(skb, &f);
	if (miss == PARSE_NOT_IP)
		return TC_ACT_OK;
	if (miss == PARSE_MALFORMED)
		return mon_drop(skb, &f, MON_DROP_MALFORMED);
	if (miss)
		return unparsed_to_pod(skb, &f, miss);
	verdict = xlate_admit(skb, &f);
	if (verdict != CUBE_PASS)
		return verdict;
	if (xlate_revnat(skb, &f, 0))
		return mon_drop(skb, &f, MON_DROP_NAT_REWRITE);
	return TC_ACT_OK;
}

SEC("tcx/ingress")
int from_pod(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb, MON_AT_FROM_POD);

	return mon_cubes_end(skb, handle_from_pod(skb, 0), len);
}

SEC("tcx/egress")
int to_pod(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb, MON_AT_TO_POD);

	return mon_cubes_end(skb, handle_to_pod(skb), len);
}

/* netkit's verdicts are tc's: NETKIT_PASS is TC_ACT_OK (on into the other
 * namespace's stack), NETKIT_DROP TC_ACT_SHOT, NETKIT_REDIRECT
 * TC_ACT_REDIRECT. */
SEC("netkit/peer")
int from_pod_netkit(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb, MON_AT_FROM_POD);

	return mon_cubes_end(skb, handle_from_pod(skb, 1), len);
}

/* The CNI plugin keeps the mark of what the node sends into a netkit pod
 * (scrub none on the primary device: the router's HOOK_MARK_VIA_VETH must
 * reach this program), so this program drops every mark, as a veth
 * crossing into the pod's namespace would. */
SEC("netkit/primary")
int to_pod_netkit(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb, MON_AT_TO_POD);
	int verdict = handle_to_pod(skb);

	skb->mark = 0;
	return mon_cubes_end(skb, verdict, len);
}
