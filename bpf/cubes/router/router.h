/* router.h: where a packet goes once the Service cube is done with it:
 * into a pod of this node (bpf_redirect_peer: straight into the pod's
 * namespace, neither the host stack nor the pod veth's transmit path), to
 * a pod of another node (the VXLAN overlay, or the FIB's next hop on the
 * underlay), or to the kernel (everything else: the node itself, and
 * addresses outside the cluster).
 */
#pragma once
#include "lib/common.h"
#include "lib/fib.h"
#include "lib/hook.h"
#include "router_maps.h"
#include "cubes/monitor/monitor.h"

static always_inline const struct router_endpoint *router_endpoint(const struct nc_addr *daddr)
{
	return bpf_map_lookup_elem(&router_endpoints, daddr);
}

/* ipv6_link_scoped says whether IPv6 address a is link-local unicast
 * (fe80::/10) or unspecified (::, a duplicate address detection probe's
 * source). */
static always_inline int ipv6_link_scoped(const struct nc_addr *a)
{
	const __u8 *b = (const __u8 *)a;

	if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
		return 1;
	return !(a->w[0] | a->w[1] | a->w[2] | a->w[3]);
}

/* router_source_ok says whether the pod behind skb's device may send from
 * saddr: one of its own addresses, on its own device; or, IPv6, a
 * link-local or unspecified source to the link (neighbour discovery,
 * duplicate address detection, MLD: to_link says the destination is
 * link-local unicast or link-scoped multicast), which the node's stack
 * answers and routes nowhere. Anything else is a forged source. The
 * device's slot first (router_source_slots), then the hash. */
static always_inline int router_source_ok(const struct __sk_buff *skb, __u8 family, const struct nc_addr *saddr,
					  const struct nc_addr *daddr, int to_link)
{
	const struct router_source_slot *slot;
	const struct router_source *s;
	__u32 i = skb->ifindex & (ROUTER_SOURCE_SLOTS - 1);

	if (!router_check_sources)
		return 1;
	slot = bpf_map_lookup_elem(&router_source_slots, &i);
	if (slot && slot->ifindex == skb->ifindex &&
	    (addr_equal(&slot->addrs[0], saddr) || addr_equal(&slot->addrs[1], saddr)))
		return 1;
	s = bpf_map_lookup_elem(&router_sources, saddr);
	if (s)
		return s->ifindex == skb->ifindex;
	if (family != 6 || !ipv6_link_scoped(saddr))
		return 0;
	return to_link || (ipv6_link_scoped(daddr) && (daddr->w[0] | daddr->w[1] | daddr->w[2] | daddr->w[3]));
}

/* router_local_pod says whether a is an address of a pod of this node (in
 * every routing mode). */
static always_inline int router_local_pod(const struct nc_addr *a)
{
	return bpf_map_lookup_elem(&router_sources, a) != NULL;
}

/* router_from_node says whether skb's frame was sent by another node of
 * the cluster (its Ethernet source: router_node_macs). */
static always_inline int router_from_node(struct __sk_buff *skb)
{
	struct router_mac m = {};

	if (bpf_skb_load_bytes(skb, offsetof(struct ethhdr, h_source), m.addr, 6))
		return 0;
	return bpf_map_lookup_elem(&router_node_macs, &m) != NULL;
}

static always_inline const struct router_conf *router_cfg(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&router_config, &k);
}

/* set_macs writes the frame's Ethernet addresses. */
static always_inline int set_macs(struct __sk_buff *skb, const __u8 *dst, const __u8 *src)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return -1;
	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, src, ETH_ALEN);
	return 0;
}

/* router_to_endpoint hands the packet to a pod of this node: straight
 * into it (bpf_redirect_peer), or out of the pod's device, whose to_pod
 * lets it through at once (HOOK_MARK_VIA_VETH: it was admitted already):
 * when a to_pod hook asked for the device's qdisc, and from a netkit pod's
 * from_pod (at_xmit), which runs as the pod transmits, where the kernel
 * allows no redirect into a peer (only a tc ingress program may: every
 * other caller is one). at_xmit is a constant of the entry program (an
 * argument, not a field of the flow, so that the compiler drops the test
 * from every other program). */
static always_inline int router_to_endpoint(struct __sk_buff *skb, const struct router_endpoint *ep,
					    const __u8 at_xmit)
{
	if (set_macs(skb, ep->pod_mac, ep->host_mac))
		return mon_drop_packet(skb, MON_AT_NONE, MON_DROP_MALFORMED);
	mon_routed(MON_RT_POD, ep->ifindex, NULL);
	if (at_xmit)
		skb->mark = HOOK_MARK_VIA_VETH;
	if (skb->mark == HOOK_MARK_VIA_VETH)
		return bpf_redirect(ep->ifindex, 0);
	return bpf_redirect_peer(ep->ifindex, 0);
}

/* router_to_overlay sends the packet into the VXLAN device, whose egress
 * program (to_overlay) picks the tunnel's remote end. The inner frame is
 * addressed to the device itself; the receiving node's from_overlay takes
 * it as its own. */
static always_inline int router_to_overlay(struct __sk_buff *skb, const struct router_conf *cfg)
{
	if (set_macs(skb, cfg->vxlan_mac, cfg->vxlan_mac))
		return mon_drop_packet(skb, MON_AT_NONE, MON_DROP_MALFORMED);
	mon_routed(MON_RT_OVERLAY, cfg->vxlan_ifindex, NULL);
	return bpf_redirect(cfg->vxlan_ifindex, 0);
}

/* router_remote_node finds the node whose pod CIDR holds daddr. */
static always_inline const struct router_node *router_remote_node(const struct nc_addr *daddr)
{
	struct nc_prefix k = {.prefixlen = 128, .addr = *daddr};

	return bpf_map_lookup_elem(&router_nodes, &k);
}

/* router_to_node sends a packet that is not for a pod of this node on:
 * into the overlay if it is for another node's pod and this node runs
 * VXLAN, else to the FIB's next hop, else (the node itself, no route) to
 * the kernel. In kernel mode the kernel routes it, unless it must not see
 * it (snat: its source is now this node's, a martian on input). remote
 * says whether daddr is in another node's pod CIDR when the caller has
 * looked already (1 or 0), or -1: looked up here, in VXLAN mode only. */
static always_inline int router_to_node(struct __sk_buff *skb, __u8 family, const struct nc_addr *saddr,
					const struct nc_addr *daddr, int snat, int remote)
{
	const struct router_conf *cfg = router_cfg();

	if (cfg && cfg->mode == ROUTER_KERNEL && !snat)
		return TC_ACT_OK;
	if (cfg && cfg->mode == ROUTER_VXLAN && cfg->vxlan_ifindex &&
	    (remote < 0 ? router_remote_node(daddr) != NULL : remote))
		return router_to_overlay(skb, cfg);
	return redirect_to_next_hop(skb, family, saddr, daddr);
}

/* router_inner_dscp is the DSCP of the packet skb carries (0: unreadable),
 * shifted into a TOS byte, its ECN bits clear (the tunnel copies those). */
static always_inline __u8 router_inner_dscp(struct __sk_buff *skb)
{
	__u8 b[2];

	if (bpf_skb_load_bytes(skb, L3_OFF, b, 2))
		return 0;
	if ((b[0] >> 4) == 4)
		return b[1] & 0xfc;
	if ((b[0] >> 4) == 6)
		return ((b[0] << 4) | (b[1] >> 4)) & 0xfc;
	return 0;
}

/* router_set_tunnel gives a packet leaving through the VXLAN device its
 * tunnel's remote end: the node whose pod CIDR holds daddr (IPv4 underlay
 * when the node has one), and the inner packet's DSCP on the outer header
 * (a network slice's, qos.h), so the underlay can honour it. Returns -1
 * when no node has it. */
static always_inline int router_set_tunnel(struct __sk_buff *skb, const struct nc_addr *daddr)
{
	const struct router_conf *cfg = router_cfg();
	const struct router_node *n = router_remote_node(daddr);
	struct bpf_tunnel_key key = {};
	__u64 flags = 0;

	if (!cfg || !n)
		return -1;
	key.tunnel_id = cfg->vni;
	key.tunnel_ttl = 64;
	key.tunnel_tos = router_inner_dscp(skb);
	if (addr_is_v4(&n->underlay)) {
		key.remote_ipv4 = bpf_ntohl(n->underlay.w[3]);
	} else {
		__builtin_memcpy(key.remote_ipv6, n->underlay.w, 16);
		flags = BPF_F_TUNINFO_IPV6;
	}
	if (bpf_skb_set_tunnel_key(skb, &key, sizeof(key), flags))
		return -1;
	mon_routed(MON_RT_TUNNEL, skb->ifindex, &n->underlay);
	return 0;
}
