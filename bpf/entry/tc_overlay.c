/* tc_overlay.c: the VXLAN overlay device (tcx), in VXLAN routing mode.
 *   from_overlay (ingress, decapsulated): a packet for a pod of this node
 *                goes straight into it (a Service reply translated back
 *                first); anything else is the node's to route. The inner
 *                frame was addressed to the sending node's device, so it
 *                is taken as this host's first.
 *   to_overlay   (egress): the tunnel's remote end, the node whose pod
 *                CIDR holds the destination (router.h); none: dropped;
 *                link-local multicast is the kernel's (not a pod's).
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
			return xlate_deliver(skb, &f, ep, ct_lookup(&f, CT_REPLY), 0);
	}
	bpf_skb_change_type(skb, PACKET_HOST);
	return TC_ACT_OK;
}

static always_inline int handle_to_overlay(struct __sk_buff *skb)
{
	struct flow f = {.point = MON_AT_TO_OVERLAY};

	if (parse_addrs(skb, &f))
		return mon_drop(skb, &f, MON_DROP_MALFORMED);
	/* Link-local multicast (the kernel's MLD reports when the device
	 * comes up) is for the overlay link itself: no node is its tunnel's
	 * end. It goes to the kernel, whose collect-metadata device discards
	 * a packet without one (tx_dropped), as a flannel overlay without
	 * flooding does; it is not a pod's packet dropped. */
	if (link_local_multicast(&f))
		return TC_ACT_OK;
	if (router_set_tunnel(skb, &f.daddr))
		return mon_drop(skb, &f, MON_DROP_NO_TUNNEL);
	return TC_ACT_OK;
}

SEC("tcx/ingress")
int from_overlay(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb, MON_AT_FROM_OVERLAY);

	return mon_cubes_end(skb, handle_from_overlay(skb), len);
}

SEC("tcx/egress")
int to_overlay(struct __sk_buff *skb)
{
	__u32 len = mon_cubes_begin(skb, MON_AT_TO_OVERLAY);

	return mon_cubes_end(skb, handle_to_overlay(skb), len);
}
