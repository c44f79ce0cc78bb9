/* tc_overlay.c: the VXLAN overlay device (tcx), in VXLAN routing mode.
 *   from_overlay (ingress, decapsulated): a packet for a pod of this node
 *                goes straight into it (a Service reply translated back
 *                first); anything else is the node's to route. The inner
 *                frame was addressed to the sending node's device, so it
 *                is taken as this host's first.
 *   to_overlay   (egress): the tunnel's remote end, the node whose pod
 *                CIDR holds the destination (router.h); none: dropped.
 */
#include "xlate.h"

#define PACKET_HOST 0

static always_inline int handle_from_overlay(struct __sk_buff *skb)
{
	const struct router_endpoint *ep;
	struct flow f = {.point = MON_AT_FROM_OVERLAY};

	if (!parse_flow(skb, &f)) {
		ep = router_endpoint(&f.daddr);
		if (ep)
			return xlate_deliver(skb, &f, ep);
	}
	bpf_skb_change_type(skb, PACKET_HOST);
	return TC_ACT_OK;
}

static always_inline int handle_to_overlay(struct __sk_buff *skb)
{
	struct flow f = {.point = MON_AT_TO_OVERLAY};

	if (parse_daddr(skb, &f.daddr))
		return mon_drop(skb, &f, MON_DROP_MALFORMED);
	if (router_set_tunnel(skb, &f.daddr))
		return mon_drop(skb, &f, MON_DROP_NO_TUNNEL);
	return TC_ACT_OK;
}

SEC("tcx/ingress")
int from_overlay(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb);

	return mon_cubes_end(handle_from_overlay(skb), len);
}

SEC("tcx/egress")
int to_overlay(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb);

	return mon_cubes_end(handle_to_overlay(skb), len);
}
