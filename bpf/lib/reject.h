/* reject.h: answers a connection to a Service without endpoints at once, as
 * kube-proxy's REJECT rule does: TCP gets a RST, UDP and SCTP an ICMP port
 * unreachable. The packet is rewritten into the reply in place and sent back
 * out of the interface it came in on. */
#pragma once
#include "common.h"
#include "parse.h"

struct pseudo4 {
	__be32 saddr, daddr;
	__u8 zero, proto;
	__be16 len;
};

struct pseudo6 {
	struct nc_addr saddr, daddr;
	__be32 len;
	__u8 zero[3], nexthdr;
};

static always_inline __u32 csum_add_buf(void *buf, __u32 size, __u32 seed)
{
	return (__u32)bpf_csum_diff(NULL, 0, buf, size, seed);
}

static always_inline void eth_reply(struct ethhdr *to, const struct ethhdr *from)
{
	__builtin_memcpy(to->h_dest, from->h_source, ETH_ALEN);
	__builtin_memcpy(to->h_source, from->h_dest, ETH_ALEN);
	to->h_proto = from->h_proto;
}

/* tcp_rst_for builds the RST answering `in` (RFC 9293, 3.10.7.1). */
static always_inline struct tcphdr tcp_rst_for(const struct tcphdr *in, __u32 payload)
{
	struct tcphdr rst = {
		.source = in->dest,
		.dest = in->source,
		.doff = 5,
		.rst = 1,
	};

	if (in->ack) {
		rst.seq = in->ack_seq;
	} else {
		rst.ack = 1;
		rst.ack_seq = bpf_htonl(bpf_ntohl(in->seq) + payload + in->syn + in->fin);
	}
	return rst;
}

static always_inline int write_reply(struct __sk_buff *skb, void *reply, __u32 size)
{
	if (bpf_skb_change_tail(skb, size, 0) || bpf_skb_store_bytes(skb, 0, reply, size, 0))
		return TC_ACT_SHOT;
	return bpf_redirect(skb->ifindex, 0);
}

static always_inline int reject_tcp4(struct __sk_buff *skb, const struct flow *f)
{
	struct {
		struct ethhdr eth;
		struct iphdr ip;
		struct tcphdr tcp;
	} __attribute__((packed)) r = {};
	struct ethhdr eth;
	struct iphdr ip;
	struct tcphdr tcp;

	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) ||
	    bpf_skb_load_bytes(skb, L3_OFF, &ip, sizeof(ip)) ||
	    bpf_skb_load_bytes(skb, f->l4_off, &tcp, sizeof(tcp)) || tcp.rst)
		return TC_ACT_SHOT;

	eth_reply(&r.eth, &eth);
	r.ip.version = 4;
	r.ip.ihl = 5;
	r.ip.ttl = 64;
	r.ip.protocol = IPPROTO_TCP;
	r.ip.tot_len = bpf_htons(sizeof(r.ip) + sizeof(r.tcp));
	r.ip.saddr = ip.daddr;
	r.ip.daddr = ip.saddr;
	r.ip.check = csum_fold(csum_add_buf(&r.ip, sizeof(r.ip), 0));
	r.tcp = tcp_rst_for(&tcp, bpf_ntohs(ip.tot_len) - ip.ihl * 4 - tcp.doff * 4);

	struct pseudo4 ph = {
		.saddr = r.ip.saddr, .daddr = r.ip.daddr,
		.proto = IPPROTO_TCP, .len = bpf_htons(sizeof(r.tcp)),
	};
	r.tcp.check = csum_fold(csum_add_buf(&r.tcp, sizeof(r.tcp),
					     csum_add_buf(&ph, sizeof(ph), 0)));
	return write_reply(skb, &r, sizeof(r));
}

static always_inline int reject_tcp6(struct __sk_buff *skb, const struct flow *f)
{
	struct {
		struct ethhdr eth;
		struct ipv6hdr ip;
		struct tcphdr tcp;
	} __attribute__((packed)) r = {};
	struct ethhdr eth;
	struct ipv6hdr ip;
	struct tcphdr tcp;

	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) ||
	    bpf_skb_load_bytes(skb, L3_OFF, &ip, sizeof(ip)) ||
	    bpf_skb_load_bytes(skb, f->l4_off, &tcp, sizeof(tcp)) || tcp.rst)
		return TC_ACT_SHOT;

	eth_reply(&r.eth, &eth);
	r.ip.version = 6;
	r.ip.nexthdr = IPPROTO_TCP;
	r.ip.hop_limit = 64;
	r.ip.payload_len = bpf_htons(sizeof(r.tcp));
	r.ip.saddr = ip.daddr;
	r.ip.daddr = ip.saddr;
	r.tcp = tcp_rst_for(&tcp, bpf_ntohs(ip.payload_len) - tcp.doff * 4);

	struct pseudo6 ph = {
		.saddr = f->daddr, .daddr = f->saddr,
		.len = bpf_htonl(sizeof(r.tcp)), .nexthdr = IPPROTO_TCP,
	};
	r.tcp.check = csum_fold(csum_add_buf(&r.tcp, sizeof(r.tcp),
					     csum_add_buf(&ph, sizeof(ph), 0)));
	return write_reply(skb, &r, sizeof(r));
}

/* ICMP errors quote the offending IP header and the first 8 bytes after it. */
#define QUOTE4 (sizeof(struct iphdr) + 8)
#define QUOTE6 (sizeof(struct ipv6hdr) + 8)

static always_inline int reject_udp4(struct __sk_buff *skb, const struct flow *f)
{
	struct {
		struct ethhdr eth;
		struct iphdr ip;
		struct icmphdr icmp;
		__u8 quote[QUOTE4];
	} __attribute__((packed)) r = {};
	struct ethhdr eth;

	if (f->l4_off != L3_OFF + sizeof(struct iphdr)) /* IP options: not worth quoting */
		return TC_ACT_SHOT;
	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) ||
	    bpf_skb_load_bytes(skb, L3_OFF, r.quote, sizeof(r.quote)))
		return TC_ACT_SHOT;

	eth_reply(&r.eth, &eth);
	r.ip.version = 4;
	r.ip.ihl = 5;
	r.ip.ttl = 64;
	r.ip.protocol = IPPROTO_ICMP;
	r.ip.tot_len = bpf_htons(sizeof(r.ip) + sizeof(r.icmp) + sizeof(r.quote));
	r.ip.saddr = f->daddr.w[3];
	r.ip.daddr = f->saddr.w[3];
	r.ip.check = csum_fold(csum_add_buf(&r.ip, sizeof(r.ip), 0));
	r.icmp.type = ICMP_DEST_UNREACH;
	r.icmp.code = ICMP_PORT_UNREACH;
	r.icmp.checksum = csum_fold(csum_add_buf(&r.icmp, sizeof(r.icmp) + sizeof(r.quote), 0));
	return write_reply(skb, &r, sizeof(r));
}

static always_inline int reject_udp6(struct __sk_buff *skb, const struct flow *f)
{
	struct {
		struct ethhdr eth;
		struct ipv6hdr ip;
		struct icmp6hdr icmp;
		__u8 quote[QUOTE6];
	} __attribute__((packed)) r = {};
	struct ethhdr eth;

	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) ||
	    bpf_skb_load_bytes(skb, L3_OFF, r.quote, sizeof(r.quote)))
		return TC_ACT_SHOT;

	eth_reply(&r.eth, &eth);
	r.ip.version = 6;
	r.ip.nexthdr = IPPROTO_ICMPV6;
	r.ip.hop_limit = 64;
	r.ip.payload_len = bpf_htons(sizeof(r.icmp) + sizeof(r.quote));
	__builtin_memcpy(&r.ip.saddr, &f->daddr, sizeof(f->daddr));
	__builtin_memcpy(&r.ip.daddr, &f->saddr, sizeof(f->saddr));
	r.icmp.icmp6_type = ICMPV6_DEST_UNREACH;
	r.icmp.icmp6_code = ICMPV6_PORT_UNREACH;

	struct pseudo6 ph = {
		.saddr = f->daddr, .daddr = f->saddr,
		.len = bpf_htonl(sizeof(r.icmp) + sizeof(r.quote)), .nexthdr = IPPROTO_ICMPV6,
	};
	r.icmp.icmp6_cksum = csum_fold(csum_add_buf(&r.icmp, sizeof(r.icmp) + sizeof(r.quote),
						    csum_add_buf(&ph, sizeof(ph), 0)));
	return write_reply(skb, &r, sizeof(r));
}

/* reject answers f (a TCP, UDP or SCTP packet to a Service without
 * endpoints). SCTP gets UDP's answer, ICMP port unreachable, as from
 * kube-proxy's REJECT rule (an ABORT would need a CRC32c computed here);
 * the quote's 8 bytes are its ports and verification tag, which the
 * client's stack matches to its association. */
static always_inline int reject(struct __sk_buff *skb, const struct flow *f)
{
	if (f->frag != FRAG_NONE)
		return TC_ACT_SHOT; /* no answer built for a fragment (it may lack
				     * the headers quoted) */
	if (f->proto == IPPROTO_TCP)
		return f->family == 4 ? reject_tcp4(skb, f) : reject_tcp6(skb, f);
	return f->family == 4 ? reject_udp4(skb, f) : reject_udp6(skb, f);
}
