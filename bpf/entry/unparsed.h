/* unparsed.h: the packets of a pod whose ports cannot be read (enum
 * parse_miss): an IPv6 packet with an extension header other than a
 * fragment header, or a later fragment whose first fragment was not seen
 * here. No frontend and no port rule can match them, and passing them to
 * the kernel untouched would let them past what needs their ports, so:
 *   to a ClusterIP: no backend can be chosen; dropped with its reason
 *     (a stray packet to an address the kernel has no route for);
 *   from or to a pod a NetworkPolicy isolates: judged as a packet to port
 *     0, which only a rule allowing every port (of its protocol, or every
 *     protocol) allows (fail closed); the protocol is the extension
 *     header's number, so only a rule without ports allows that;
 *   link-local multicast (the kernel's MLD reports, behind a hop-by-hop
 *     header) and everything else: to the kernel, as before.
 * Other packets without ports (ICMP, other protocols) are not judged by
 * policy here (README: not built yet).
 */
#pragma once
#include "xlate.h"

static always_inline int unparsed_drop(struct __sk_buff *skb, struct flow *f, int miss)
{
	return mon_drop(skb, f, miss == PARSE_EXT_HEADER ? MON_DROP_EXT_HEADER : MON_DROP_FRAG_UNSEEN);
}

/* unparsed_from_pod: what a pod sent (f: its addresses and protocol). */
static always_inline int unparsed_from_pod(struct __sk_buff *skb, struct flow *f, int miss)
{
	if (link_local_multicast(f))
		return TC_ACT_OK;
	if (lb_is_vip(&f->daddr))
		return unparsed_drop(skb, f, miss);
	if (!pol_check(skb, f, POL_EGRESS))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

/* unparsed_to_pod: what the kernel delivers to a pod. */
static always_inline int unparsed_to_pod(struct __sk_buff *skb, struct flow *f)
{
	if (link_local_multicast(f))
		return TC_ACT_OK;
	if (!pol_check(skb, f, POL_INGRESS))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
