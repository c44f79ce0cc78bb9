/* announce.h: the node answers ARP (IPv4) and neighbour solicitations
 * (IPv6) for the LoadBalancer IPs it serves, on its uplinks (lb_announce),
 * so that a host on the underlay reaches a LoadBalancer IP with no route:
 * it asks the link who has the address, and a node that serves it says
 * "I do". The request is rewritten into the answer in place and sent back
 * out of the uplink it came in on.
 *
 * In the datapath rather than the kernel's proxy ARP/NDP: the kernel
 * answers a proxy entry only for an address it routes out of another
 * interface, with forwarding on (arp_process), and delays each answer by
 * up to proxy_delay; here the answer is immediate and the agent's map is
 * the only state.
 *
 * Several nodes may answer for one address (externalTrafficPolicy
 * Cluster: all of them). The asker keeps the first answer: Linux ignores
 * an ARP answer changing a neighbour entry younger than locktime (1 s),
 * and our neighbour advertisements do not set Override (RFC 4861 7.2.7:
 * an anycast or proxy answer must not), so a client sticks to one node
 * until its entry goes stale, and then asks the same node first
 * (unicast probe). */
#pragma once
#include "lib/common.h"
#include "lib/reject.h"
#include "lb_maps.h"

#define ARPHRD_ETHER_BE bpf_htons(1)
#define ARPOP_REQUEST_BE bpf_htons(1)
#define ARPOP_REPLY_BE bpf_htons(2)
#define ND_NEIGHBOR_SOLICIT 135
#define ND_NEIGHBOR_ADVERT 136
#define ND_OPT_TARGET_LL_ADDR 2
#define ND_NA_FLAG_SOLICITED bpf_htonl(0x40000000)

/* An Ethernet ARP request or reply for IPv4. */
struct lb_arp {
	struct ethhdr eth;
	__be16 htype, ptype;
	__u8 hlen, plen;
	__be16 op;
	__u8 sha[ETH_ALEN], spa[4], tha[ETH_ALEN], tpa[4];
} __attribute__((packed));

/* A neighbour solicitation or advertisement with one link-layer address
 * option (what a solicitation for address resolution carries, RFC 4861
 * 4.3: the source's address MUST be in a multicast one). */
struct lb_nd {
	struct ethhdr eth;
	struct ipv6hdr ip;
	__u8 type, code;
	__be16 csum;
	__be32 flags;
	struct nc_addr target;
	__u8 opt_type, opt_len, opt_mac[ETH_ALEN];
} __attribute__((packed));

static always_inline const struct lb_announce_val *lb_announced(struct __sk_buff *skb, const struct nc_addr *a)
{
	struct lb_announce_key k = {.ifindex = skb->ifindex, .addr = *a};

	return bpf_map_lookup_elem(&lb_announce, &k);
}

static always_inline int lb_answer_arp(struct __sk_buff *skb)
{
	const struct lb_announce_val *v;
	struct lb_arp a;
	struct nc_addr target;
	__u32 ip;

	if (bpf_skb_load_bytes(skb, 0, &a, sizeof(a)) || a.htype != ARPHRD_ETHER_BE ||
	    a.ptype != bpf_htons(ETH_P_IP) || a.hlen != ETH_ALEN || a.plen != 4 || a.op != ARPOP_REQUEST_BE)
		return CUBE_PASS;
	__builtin_memcpy(&ip, a.tpa, 4);
	addr_from_v4(&target, ip);
	v = lb_announced(skb, &target);
	if (!v)
		return CUBE_PASS;

	a.op = ARPOP_REPLY_BE;
	__builtin_memcpy(a.tha, a.sha, ETH_ALEN);
	__builtin_memcpy(a.tpa, a.spa, 4);
	__builtin_memcpy(a.sha, v->mac, ETH_ALEN);
	__builtin_memcpy(a.spa, &ip, 4);
	__builtin_memcpy(a.eth.h_dest, a.eth.h_source, ETH_ALEN);
	__builtin_memcpy(a.eth.h_source, v->mac, ETH_ALEN);
	if (bpf_skb_store_bytes(skb, 0, &a, sizeof(a), 0))
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

static always_inline int lb_answer_nd(struct __sk_buff *skb)
{
	const struct lb_announce_val *v;
	struct nc_addr asker, target;
	struct lb_nd n;

	if (bpf_skb_load_bytes(skb, 0, &n, sizeof(n)) || n.ip.nexthdr != IPPROTO_ICMPV6 ||
	    n.ip.payload_len != bpf_htons(sizeof(n) - sizeof(n.eth) - sizeof(n.ip)) ||
	    n.ip.hop_limit != 255 || n.type != ND_NEIGHBOR_SOLICIT || n.code != 0)
		return CUBE_PASS;
	__builtin_memcpy(&asker, &n.ip.saddr, sizeof(asker));
	/* From :: it is duplicate address detection, not a question to
	 * answer to one host. */
	if (!(asker.w[0] | asker.w[1] | asker.w[2] | asker.w[3]))
		return CUBE_PASS;
	target = n.target;
	v = lb_announced(skb, &target);
	if (!v)
		return CUBE_PASS;

	__builtin_memcpy(n.eth.h_dest, n.eth.h_source, ETH_ALEN);
	__builtin_memcpy(n.eth.h_source, v->mac, ETH_ALEN);
	__builtin_memcpy(&n.ip.daddr, &asker, sizeof(asker));
	__builtin_memcpy(&n.ip.saddr, &target, sizeof(target));
	n.type = ND_NEIGHBOR_ADVERT;
	n.csum = 0;
	n.flags = ND_NA_FLAG_SOLICITED;
	n.opt_type = ND_OPT_TARGET_LL_ADDR;
	n.opt_len = 1;
	__builtin_memcpy(n.opt_mac, v->mac, ETH_ALEN);

	struct pseudo6 ph = {
		.saddr = target, .daddr = asker,
		.len = bpf_htonl(sizeof(n) - sizeof(n.eth) - sizeof(n.ip)), .nexthdr = IPPROTO_ICMPV6,
	};
	n.csum = csum_fold(csum_add_buf(&n.type, sizeof(n) - sizeof(n.eth) - sizeof(n.ip),
					csum_add_buf(&ph, sizeof(ph), 0)));
	if (bpf_skb_store_bytes(skb, 0, &n, sizeof(n), 0))
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

/* lb_answer_neighbour answers an ARP request or neighbour solicitation for
 * an announced address (a tc verdict), or lets the frame go (CUBE_PASS):
 * it is called for the frames the flow parser does not read. */
static always_inline int lb_answer_neighbour(struct __sk_buff *skb)
{
	if (skb->protocol == bpf_htons(ETH_P_ARP))
		return lb_answer_arp(skb);
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return lb_answer_nd(skb);
	return CUBE_PASS;
}
