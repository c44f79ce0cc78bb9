/* icmp.h: reads the ICMP and ICMPv6 messages the datapath translates.
 *   echo request / reply: a flow of its own, the identifier playing the
 *     port (a request's source port, a reply's destination port; the other
 *     is 0), so that a pod's ping is masqueraded and tracked like UDP and
 *     the reply's key is its request's reply key;
 *   errors (destination unreachable, fragmentation needed / packet too
 *     big, time exceeded, parameter problem): they quote the packet that
 *     caused them, which belongs to a flow that may have been translated;
 *     icmp_quote reads that packet as the flow it was sent as.
 * Everything else, and any fragment, is left to the kernel untouched.
 */
#pragma once
#include "common.h"
#include "parse.h"

#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8
#define ICMP_TIME_EXCEEDED 11
#define ICMP_PARAMETERPROB 12
#ifndef ICMPV6_ECHO_REQUEST
#define ICMPV6_ECHO_REQUEST 128
#define ICMPV6_ECHO_REPLY 129
#endif

enum icmp_msg {
	ICMP_MSG_OTHER = 0, /* not translated: passed as it is */
	ICMP_MSG_ECHO,      /* echo request */
	ICMP_MSG_ECHO_REPLY,
	ICMP_MSG_ERROR,     /* quotes a packet of a flow */
};

/* The fixed part every ICMP message starts with, then (echo) the
 * identifier and sequence, or (errors) 4 bytes of type-specific data. */
struct icmp_head {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be16 id;  /* echo: identifier */
	__be16 seq; /* echo: sequence */
};

/* ICMP_QUOTE_OFF: the quoted packet starts after the 8-byte header. */
#define ICMP_QUOTE_OFF 8
/* An error must quote the first 8 bytes of the packet's L4 header (RFC
 * 792; RFC 4443 quotes more): the ports, or an echo's identifier. */
#define ICMP_QUOTE_L4 8

static always_inline int icmp_classify(__u8 family, __u8 type)
{
	if (family == 4) {
		switch (type) {
		case ICMP_ECHO:
			return ICMP_MSG_ECHO;
		case ICMP_ECHOREPLY:
			return ICMP_MSG_ECHO_REPLY;
		case ICMP_DEST_UNREACH: /* code 4: fragmentation needed */
		case ICMP_TIME_EXCEEDED:
		case ICMP_PARAMETERPROB:
			return ICMP_MSG_ERROR;
		}
		return ICMP_MSG_OTHER;
	}
	switch (type) {
	case ICMPV6_ECHO_REQUEST:
		return ICMP_MSG_ECHO;
	case ICMPV6_ECHO_REPLY:
		return ICMP_MSG_ECHO_REPLY;
	case ICMPV6_DEST_UNREACH:
	case ICMPV6_PKT_TOOBIG:
	case ICMPV6_TIME_EXCEED:
	case ICMPV6_PARAMPROB:
		return ICMP_MSG_ERROR;
	}
	return ICMP_MSG_OTHER;
}

/* parse_icmp fills f for an ICMP (IPv4) or ICMPv6 message that is not a
 * fragment and returns its kind (ICMP_MSG_OTHER for anything else: not
 * ICMP, a fragment, a type not translated, too short to read). An echo
 * carries its identifier as a port; an error has none (0, 0). */
static always_inline int parse_icmp(struct __sk_buff *skb, struct flow *f)
{
	struct icmp_head h;
	int kind;

	__u32 frag_id;

	if (parse_l3(skb, f, &frag_id) || f->frag != FRAG_NONE)
		return ICMP_MSG_OTHER;
	if (f->proto != (f->family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6))
		return ICMP_MSG_OTHER;
	if (bpf_skb_load_bytes(skb, f->l4_off, &h, sizeof(h)))
		return ICMP_MSG_OTHER;
	kind = icmp_classify(f->family, h.type);
	if (kind == ICMP_MSG_ECHO)
		f->sport = h.id;
	else if (kind == ICMP_MSG_ECHO_REPLY)
		f->dport = h.id;
	return kind;
}

/* What an ICMP error quotes: the packet, as the flow it was sent as (an
 * echo request's identifier as its source port), and where its fields are
 * in the error. */
struct icmp_quote {
	struct flow f;
	__u16 ip_off;   /* its IP header */
	__u16 port_off; /* its source port (an echo's identifier); the
			 * destination port follows it, except for an echo */
};

enum icmp_quote_result {
	ICMP_QUOTE_OK = 0,
	ICMP_QUOTE_SHORT,    /* too little of the packet to tell its flow */
	ICMP_QUOTE_UNTRACKED, /* not a packet of a flow that can be translated */
};

/* icmp_quote reads the packet error e (outer flow) quotes. */
static always_inline int icmp_quote(struct __sk_buff *skb, const struct flow *e, struct icmp_quote *q)
{
	__u32 ip_off = e->l4_off + ICMP_QUOTE_OFF, l4_off;
	__be16 ports[2];
	__u8 proto;

	q->ip_off = ip_off;
	q->f.family = e->family;
	if (e->family == 4) {
		struct iphdr ip;

		if (bpf_skb_load_bytes(skb, ip_off, &ip, sizeof(ip)))
			return ICMP_QUOTE_SHORT;
		if (ip.version != 4 || ip.ihl < 5)
			return ICMP_QUOTE_UNTRACKED;
		if (ip.frag_off & bpf_htons(0x1fff)) /* a later fragment: no ports */
			return ICMP_QUOTE_UNTRACKED;
		proto = ip.protocol;
		l4_off = ip_off + ip.ihl * 4;
		addr_from_v4(&q->f.saddr, ip.saddr);
		addr_from_v4(&q->f.daddr, ip.daddr);
	} else {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes(skb, ip_off, &ip6, sizeof(ip6)))
			return ICMP_QUOTE_SHORT;
		if (ip6.version != 6)
			return ICMP_QUOTE_UNTRACKED;
		proto = ip6.nexthdr; /* an extension header: not a flow of ours */
		l4_off = ip_off + sizeof(ip6);
		addr_from_v6(&q->f.saddr, ip6.saddr.in6_u.u6_addr32);
		addr_from_v6(&q->f.daddr, ip6.daddr.in6_u.u6_addr32);
	}
	if (l4_off + ICMP_QUOTE_L4 > skb->len)
		return ICMP_QUOTE_SHORT;
	q->f.proto = proto;
	q->f.l4_off = l4_off;
	q->port_off = l4_off;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		if (bpf_skb_load_bytes(skb, l4_off, ports, sizeof(ports)))
			return ICMP_QUOTE_SHORT;
		q->f.sport = ports[0];
		q->f.dport = ports[1];
		return ICMP_QUOTE_OK;
	}
	if (proto == (e->family == 4 ? IPPROTO_ICMP : IPPROTO_ICMPV6)) {
		struct icmp_head h;

		if (bpf_skb_load_bytes(skb, l4_off, &h, sizeof(h)))
			return ICMP_QUOTE_SHORT;
		/* Only a request has an error: it is what was sent. */
		if (icmp_classify(e->family, h.type) != ICMP_MSG_ECHO)
			return ICMP_QUOTE_UNTRACKED;
		q->f.sport = h.id;
		q->f.dport = 0;
		q->port_off = l4_off + offsetof(struct icmp_head, id);
		return ICMP_QUOTE_OK;
	}
	return ICMP_QUOTE_UNTRACKED;
}
