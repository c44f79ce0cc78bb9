/* tc_pod.c: per-packet Service load balancing on a pod's host-side veth
 * (tcx), for the traffic the socket hooks do not translate.
 *   from_pod (ingress of the host veth): the reply of an external flow to
 *            this pod -> reply_external (tc_node.c); else
 *            conntrack -> LB -> DNAT, or reject; a pod that is its own
 *            backend (hairpin) is also SNATed to the hairpin address
 *   to_pod   (egress of the host veth):  conntrack -> reverse NAT
 */
#include "lib/parse.h"
#include "lib/lb.h"
#include "lib/ct.h"
#include "lib/nat.h"
#include "lib/reject.h"

SEC("tcx/ingress")
int from_pod(struct __sk_buff *skb)
{
	struct flow f = {};
	struct lb_svc_val *svc;
	struct lb_backend *backend = NULL;
	struct ct_entry *ct;
	struct nc_addr snat = {};
	__be16 sport = 0;
	__u32 backend_id;

	if (parse_flow(skb, &f))
		return TC_ACT_OK;
	ct = ct_lookup(&f, CT_REPLY);
	if (ct && (ct->flags & CT_F_EXTERNAL))
		return reply_external(skb, &f, ct);
	svc = lb_lookup_service(&f.daddr, f.dport, f.proto);
	if (!svc) { /* not addressed to a Service */
		if (flow_is_new(&f))
			ct_forget_reply(&f);
		return TC_ACT_OK;
	}
	if (!lb_source_allowed(svc, &f.saddr))
		return TC_ACT_SHOT;

	/* An established flow stays on its backend while that backend exists
	 * (and a hairpin flow on its SNAT port). */
	ct = ct_lookup(&f, CT_SERVICE);
	if (ct) {
		backend = lb_lookup_backend(ct->backend_id);
		if (backend && (ct->flags & CT_F_SNAT)) {
			snat = ct->nat_addr;
			sport = ct->nat_port;
		}
	}
	if (!backend) {
		backend_id = lb_pick(&f.saddr, f.sport, &f.daddr, f.dport, f.proto, svc);
		backend = backend_id ? lb_lookup_backend(backend_id) : NULL;
		if (!backend) {
			/* internalTrafficPolicy Local without a local endpoint:
			 * dropped, as kube-proxy does; else refused. */
			if (svc->flags & LB_SVC_LOCAL)
				return TC_ACT_SHOT;
			return reject(skb, &f);
		}
		if (addr_equal(&backend->addr, &f.saddr)) {
			/* Hairpin: the pod is its own backend. */
			hairpin_addr(&snat, f.family);
			sport = snat_port(&f, &snat, &backend->addr, backend->port);
			if (!sport || ct_create_external(&f, backend_id, &backend->addr, backend->port,
							 svc->rev_nat_id, 1, &snat, sport))
				return TC_ACT_SHOT;
		} else if (ct_create(&f, backend_id, &backend->addr, backend->port, svc->rev_nat_id)) {
			return TC_ACT_SHOT;
		}
	}

	if (sport) {
		if (nat_rewrite(skb, &f, NAT_SRC, &snat, sport) ||
		    nat_rewrite(skb, &f, NAT_DST, &backend->addr, backend->port))
			return TC_ACT_SHOT;
		return redirect_to_next_hop(skb, f.family, &snat, &backend->addr);
	}
	if (nat_rewrite(skb, &f, NAT_DST, &backend->addr, backend->port))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tcx/egress")
int to_pod(struct __sk_buff *skb)
{
	struct flow f = {};
	struct ct_entry *ct;
	struct lb_frontend *fe;

	if (parse_flow(skb, &f))
		return TC_ACT_OK;
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
