/* tc_node.c: Services reached from outside the cluster through this node
 * (NodePort on the node's addresses, ExternalIPs, LoadBalancer IPs), on the
 * node's uplink (tcx ingress):
 *   a reply of such a flow (from a backend on another node, to this node's
 *   SNAT address)            -> conntrack -> reverse NAT -> back to the client
 *   a packet to an external frontend -> conntrack -> LB -> DNAT (+ SNAT to
 *   this node for externalTrafficPolicy Cluster) -> the backend's next hop
 * Everything else passes untouched. Replies from a backend on this node
 * leave through its pod's veth, where from_pod hands them to
 * reply_external.
 */
#include "lib/parse.h"
#include "lib/lb.h"
#include "lib/ct.h"
#include "lib/nat.h"
#include "lib/node.h"
#include "lib/reject.h"

/* reply_external reverse-translates the reply of an external flow: the
 * source back to the frontend, the destination back to the client if it
 * was SNATed, then sends it to the client's next hop. */
static always_inline int reply_external(struct __sk_buff *skb, const struct flow *f,
					const struct ct_entry *ct)
{
	struct lb_frontend *fe = lb_lookup_revnat(ct->rev_nat_id);
	struct nc_addr client = f->daddr;

	if (!fe)
		return TC_ACT_OK;
	if (ct->flags & CT_F_SNAT) {
		client = ct->nat_addr;
		if (nat_rewrite(skb, f, NAT_DST, &ct->nat_addr, ct->nat_port))
			return TC_ACT_SHOT;
	}
	if (nat_rewrite(skb, f, NAT_SRC, &fe->addr, fe->port))
		return TC_ACT_SHOT;
	return redirect_to_next_hop(skb, f->family, &fe->addr, &client);
}

SEC("tcx/ingress")
int from_net(struct __sk_buff *skb)
{
	struct flow f = {};
	struct lb_svc_val *svc;
	struct lb_backend *backend = NULL;
	struct ct_entry *ct;
	const struct nc_addr *snat_addr = NULL;
	struct nc_addr saddr;
	__be16 sport = 0;
	__u32 backend_id;

	if (parse_flow(skb, &f))
		return TC_ACT_OK;

	ct = ct_lookup(&f, CT_REPLY);
	if (ct && (ct->flags & CT_F_EXTERNAL))
		return reply_external(skb, &f, ct);

	svc = lb_lookup_service(&f.daddr, f.dport, f.proto);
	if (!svc || !(svc->flags & LB_SVC_EXTERNAL))
		return TC_ACT_OK;
	if (!lb_source_allowed(svc, &f.saddr))
		return TC_ACT_SHOT;

	/* An established flow stays on its backend (and SNAT port). */
	ct = ct_lookup(&f, CT_SERVICE);
	if (ct) {
		backend = lb_lookup_backend(ct->backend_id);
		if (backend && (ct->flags & CT_F_SNAT)) {
			snat_addr = &ct->nat_addr;
			sport = ct->nat_port;
		}
	}
	if (!backend) {
		backend_id = lb_pick(&f.saddr, f.sport, &f.daddr, f.dport, f.proto, svc);
		backend = backend_id ? lb_lookup_backend(backend_id) : NULL;
		if (!backend) {
			/* Local policy: another node may have endpoints. */
			if (svc->flags & LB_SVC_LOCAL)
				return TC_ACT_SHOT;
			return reject(skb, &f);
		}
		if (!(svc->flags & LB_SVC_LOCAL)) {
			snat_addr = node_addr(f.family);
			if (!snat_addr)
				return TC_ACT_SHOT;
			sport = snat_port(&f, snat_addr, &backend->addr, backend->port);
			if (!sport)
				return TC_ACT_SHOT;
		}
		if (ct_create_external(&f, backend_id, &backend->addr, backend->port,
				       svc->rev_nat_id, snat_addr != NULL, snat_addr, sport))
			return TC_ACT_SHOT;
	}

	saddr = f.saddr;
	if (snat_addr) {
		saddr = *snat_addr;
		if (nat_rewrite(skb, &f, NAT_SRC, snat_addr, sport))
			return TC_ACT_SHOT;
	}
	if (nat_rewrite(skb, &f, NAT_DST, &backend->addr, backend->port))
		return TC_ACT_SHOT;
	return redirect_to_next_hop(skb, f.family, &saddr, &backend->addr);
}
