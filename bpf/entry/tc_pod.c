/* tc_pod.c: per-packet Service load balancing on a pod's host-side veth
 * (tcx), for the traffic the socket hooks do not translate.
 *   from_pod (ingress of the host veth): the reply of an external flow to
 *            this pod -> translated back (xlate.h); else
 *            conntrack -> LB -> DNAT, or reject; a pod that is its own
 *            backend (hairpin) is also SNATed to the hairpin address
 *   to_pod   (egress of the host veth):  conntrack -> reverse NAT
 */
#include "xlate.h"
#include "cubes_gen.h"

SEC("tcx/ingress")
int from_pod(struct __sk_buff *skb)
{
	struct flow f = {};
	struct xlate x = {};
	struct lb_svc_val *svc;
	struct nc_addr hairpin;
	int verdict;

	if (parse_flow(skb, &f))
		return TC_ACT_OK;
	verdict = cubes_from_pod(skb, &f);
	if (verdict != CUBE_PASS)
		return verdict;
	if (xlate_reply(skb, &f, &verdict))
		return verdict;
	svc = lb_lookup_service(&f.daddr, f.dport, f.proto);
	if (!svc) { /* not addressed to a Service */
		if (flow_is_new(&f))
			ct_forget_reply(&f);
		return TC_ACT_OK;
	}
	if (!lb_source_allowed(svc, &f.saddr))
		return TC_ACT_SHOT;

	if (!xlate_established(&f, &x)) {
		verdict = xlate_pick(skb, &f, svc, &x);
		if (!x.backend)
			return verdict;
		if (addr_equal(&x.backend->addr, &f.saddr)) {
			/* Hairpin: the pod is its own backend. */
			hairpin_addr(&hairpin, f.family);
			xlate_snat(&f, &hairpin, &x);
			if (!x.sport || ct_create_external(&f, x.backend_id, &x.backend->addr, x.backend->port,
							   svc->rev_nat_id, 1, &x.snat, x.sport))
				return TC_ACT_SHOT;
		} else if (ct_create(&f, x.backend_id, &x.backend->addr, x.backend->port, svc->rev_nat_id)) {
			return TC_ACT_SHOT;
		}
	}
	return xlate_forward(skb, &f, &x, 0);
}

SEC("tcx/egress")
int to_pod(struct __sk_buff *skb)
{
	struct flow f = {};
	struct ct_entry *ct;
	struct lb_frontend *fe;
	int verdict;

	if (parse_flow(skb, &f))
		return TC_ACT_OK;
	verdict = cubes_to_pod(skb, &f);
	if (verdict != CUBE_PASS)
		return verdict;
	ct = ct_lookup(&f, CT_REPLY);
	if (!ct)
		return TC_ACT_OK; /* not a reply of a translated flow */
	fe = lb_lookup_revnat(ct->rev_nat_id);
	if (!fe)
		return TC_ACT_OK;
	if (nat_rewrite(skb, &f, NAT_SRC, &fe->addr, fe->port))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
