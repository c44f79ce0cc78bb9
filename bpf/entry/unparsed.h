/* unparsed.h: the IP packets of a pod that are no TCP, UDP or SCTP flow
 * with readable ports (enum parse_miss). Every one of them is judged by
 * the pod's NetworkPolicy, in both directions: nothing the parser cannot
 * read is let past policy for that (fail closed).
 *   ICMP and ICMPv6 (icmp.h): an echo is a flow of its own, its
 *     identifier the port (xlate_icmp.h masquerades a pod's echo to
 *     outside the cluster); an error is judged as the connection it quotes
 *     (pol_check_quoted); any other message as a packet to port 0.
 *   Other protocols without ports (GRE, IPIP, ESP, ...): judged as a
 *     packet to port 0, which only a rule without ports (of that protocol,
 *     or of every protocol) allows.
 *   An IPv6 packet with an extension header other than a fragment header,
 *   or a later fragment whose first fragment was not seen here: to a
 *     ClusterIP no backend can be chosen, dropped with its reason; else
 *     judged as a packet to port 0 (the protocol is the extension header's
 *     number, so only a rule without ports allows it).
 *   Packets for the link itself (to a link-local address or link-scoped
 *   multicast: neighbour discovery, MLD, IGMP) are not judged: the kernel
 *   routes none of them, and without them a pod has no network at all.
 */
#pragma once
#include "xlate.h"
#include "xlate_icmp.h"

static always_inline int unparsed_drop(struct __sk_buff *skb, struct flow *f, int miss)
{
	return mon_drop(skb, f, miss == PARSE_EXT_HEADER ? MON_DROP_EXT_HEADER : MON_DROP_FRAG_UNSEEN);
}

/* for_the_link says whether f is addressed to the link it is on. */
static always_inline int for_the_link(const struct flow *f)
{
	const __u8 *d = (const __u8 *)&f->daddr;

	if (link_local_multicast(f))
		return 1;
	return f->family == 6 && d[0] == 0xfe && (d[1] & 0xc0) == 0x80;
}

/* icmp_judged: policy for ICMP message f (read by parse_icmp as kind) of
 * the pod on side dir: 1 to let it go on, 0 to drop it. */
static always_inline int icmp_judged(struct __sk_buff *skb, struct flow *f, int kind, __u8 dir)
{
	struct icmp_quote q = {};

	if (kind == ICMP_MSG_ERROR) {
		if (icmp_quote(skb, f, &q) == ICMP_QUOTE_OK)
			return pol_check_quoted(skb, f, &q.f, dir);
		f->sport = f->dport = 0;
	}
	return pol_check(skb, f, dir);
}

/* unparsed_from_pod: what a pod sent (f: its addresses and protocol; miss:
 * why it is no flow). */
static always_inline int unparsed_from_pod(struct __sk_buff *skb, struct flow *f, int miss)
{
	int kind;

	if (for_the_link(f))
		return TC_ACT_OK;
	if (miss == PARSE_NO_PORTS) {
		if (f->proto == (f->family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6) && f->frag == FRAG_NONE) {
			kind = parse_icmp(skb, f);
			if (kind == ICMP_MSG_ECHO && xlate_icmp_masq_wanted(f))
				return xlate_icmp_from_pod(skb, f);
			return icmp_judged(skb, f, kind, POL_EGRESS) ? TC_ACT_OK : TC_ACT_SHOT;
		}
	} else if (lb_is_vip(&f->daddr)) {
		return unparsed_drop(skb, f, miss);
	}
	return pol_check(skb, f, POL_EGRESS) ? TC_ACT_OK : TC_ACT_SHOT;
}

/* unparsed_to_pod: what the kernel delivers to a pod. An ICMP error about
 * a Service flow of the pod is judged before its quote is translated back
 * to the frontend (policy knows the flow by its real endpoints). */
static always_inline int unparsed_to_pod(struct __sk_buff *skb, struct flow *f, int miss)
{
	int kind;

	if (for_the_link(f))
		return TC_ACT_OK;
	if (miss == PARSE_NO_PORTS && f->proto == (f->family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6) &&
	    f->frag == FRAG_NONE) {
		kind = parse_icmp(skb, f);
		if (!icmp_judged(skb, f, kind, POL_INGRESS))
			return TC_ACT_SHOT;
		if (kind == ICMP_MSG_ERROR)
			return xlate_icmp_to_pod(skb, f);
		return TC_ACT_OK;
	}
	return pol_check(skb, f, POL_INGRESS) ? TC_ACT_OK : TC_ACT_SHOT;
}
