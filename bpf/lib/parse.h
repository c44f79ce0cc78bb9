/* parse.h: turns a packet into a flow (addresses, ports, protocol, offsets).
 * TCP, UDP and SCTP over IPv4 and IPv6 (no extension header but a
 * fragment header) become flows, fragments included (their ports:
 * frag.h); parse_flow says why any other packet is not one (enum
 * parse_miss). A packet whose headers lie past the linear part of its skb
 * (a packet socket with a vnet header can send one so) has them pulled
 * in first: what the parser cannot read is never let past policy for
 * that. An IPv6 packet with an IPv4-mapped address is malformed (no host
 * sends one, RFC 4291 2.5.5.2, and in the 16-byte form it would pass for
 * the IPv4 host: Linux drops them too, ip6_rcv_core).
 * SCTP flows are Services' and NAT's as TCP and UDP are (its checksum
 * across a port rewrite: cubes/nat/sctp.h); conntrack reads the type of
 * their first chunk (an association's start and end).
 * ICMP echo and errors are read by icmp.h, on parse_l3.
 */
#pragma once
#include "common.h"
#include "frag.h"

struct flow {
	struct nc_addr saddr;
	struct nc_addr daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 family;    /* 4 or 6 */
	__u16 l4_off;
	__u8 tcp_flags; /* TCP: the flags byte (FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10) */
	__u8 sctp_chunk; /* SCTP: its first chunk's type (enum sctp_chunk_type; 0 if it has none) */
	enum frag_kind frag; /* FRAG_LATER: no L4 header in this packet */
	__u8 point;     /* enum mon_point: the hook that saw it (monitor events) */
	__u8 dsr;       /* it carries a DSR frontend (cubes/lb/dsr.h): after the
			 * IPv4 header, or a destination options header skipped */
};

/* Direct server return: the frontend of a flow from outside, carried to
 * the backend's node in an IPv4 option or an IPv6 destination option
 * (types from RFC 4727's experimental values: the IPv4 one copied into
 * fragments, the IPv6 one skipped by a host that does not know it). The
 * frontend's node writes it (cubes/lb/dsr.h) right after the base
 * header. */
enum dsr_opt {
	DSR_OPT4_TYPE = 0x9e, /* copy, class 0, number 30 */
	DSR_OPT4_LEN = 8,     /* type, length, port, IPv4 address */
	DSR_OPT6_TYPE = 0x1e, /* action 00 (skip), number 30 */
	DSR_OPT6_LEN = 20,    /* port, 2 bytes pad, IPv6 address */
	DSR_HDR6_LEN = 24,    /* the destination options header holding it */
};

struct dsr_opt4 {
	__u8 type;
	__u8 len;
	__be16 port;
	__be32 addr;
};

struct dsr_hdr6 {
	__u8 nexthdr;
	__u8 hdrlen; /* in 8 bytes, less the first 8: 2 */
	__u8 type;
	__u8 len;
	__be16 port;
	__u16 pad;
	__u32 addr[4];
};

#define TCP_FLAG_FIN 0x01
#define TCP_FLAG_SYN 0x02
#define TCP_FLAG_RST 0x04
#define TCP_FLAG_ACK 0x10

/* The SCTP chunk types conntrack reads (RFC 9260, 3.2): the first chunk
 * of a packet that opens or ends an association is that one (INIT and
 * SHUTDOWN COMPLETE are alone in their packet; ABORT may only follow
 * control chunks, which netcube does not read past). */
enum sctp_chunk_type : __u8 {
	SCTP_CHUNK_INIT = 1,
	SCTP_CHUNK_ABORT = 6,
	SCTP_CHUNK_SHUTDOWN_COMPLETE = 14,
};

/* The SCTP common header (RFC 9260, 3.1): the ports where TCP's and
 * UDP's are; its checksum is a CRC32c of the SCTP packet alone (no
 * pseudo-header), stored little-endian. */
struct sctp_common {
	__be16 source;
	__be16 dest;
	__be32 vtag;
	__u32 checksum;
};

/* flow_is_new says whether f opens a connection: a TCP SYN, or any UDP or
 * SCTP packet (an SCTP association whose conntrack entries are gone is
 * balanced again on its next packet, as a UDP flow is; its INIT is told
 * apart by conntrack, ct_reopens). */
static always_inline int flow_is_new(const struct flow *f)
{
	if (f->proto != IPPROTO_TCP)
		return 1;
	return (f->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) == TCP_FLAG_SYN;
}

#define L3_OFF ((__u16)sizeof(struct ethhdr))

/* An IPv6 fragment header (RFC 8200, 4.5). */
struct frag_hdr6 {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off; /* offset in 8-byte units << 3, M flag in bit 0 */
	__be32 id;
};

/* Why parse_l3 or parse_flow made no flow of a packet (0: it did). */
enum parse_miss {
	PARSE_NOT_IP = 1,    /* not IPv4 or IPv6 (ARP, say): no addresses */
	PARSE_MALFORMED = 2, /* IP, but a header cut short, or an IPv6 address
			      * IPv4-mapped (the addresses may be unread) */
	/* The addresses are read (f->proto is the header's number), the
	 * ports cannot be: */
	PARSE_NO_PORTS = 3,    /* a protocol without ports (ICMP: icmp.h; GRE, ESP, ...) */
	PARSE_EXT_HEADER = 4,  /* an IPv6 extension header other than one fragment header */
	PARSE_FRAG_UNSEEN = 5, /* a later fragment whose first fragment was not seen here */
	PARSE_AGAIN = 6,       /* (parse_flow's own) a header past the skb's linear part */
};

/* PARSE_PULL_MAX: the most header parse_flow reads: Ethernet, IPv6, the
 * DSR header, a fragment header, TCP with options. */
#define PARSE_PULL_MAX (14 + 40 + 24 + 8 + 60)

/* parse_more says why a header that ends at need is past data_end: the
 * packet is shorter (malformed), or that part is not linear (again, once
 * pulled: parse_flow). */
static always_inline int parse_more(struct __sk_buff *skb, __u32 need)
{
	return need <= skb->len ? PARSE_AGAIN : PARSE_MALFORMED;
}

/* parse_l3 reads f's IP header: family, addresses, protocol, where its L4
 * header starts, and whether it is a fragment (the datagram's id in
 * *frag_id). 0, or why not (enum parse_miss; an IPv6 extension header
 * other than a fragment header is the protocol, as read). */
static always_inline int parse_l3(struct __sk_buff *skb, struct flow *f, __u32 *frag_id)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	f->dsr = 0;
	f->frag = FRAG_NONE;
	if ((void *)(eth + 1) > end)
		return skb->len < sizeof(*eth) ? PARSE_NOT_IP : PARSE_AGAIN;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end)
			return parse_more(skb, L3_OFF + sizeof(*ip));
		if (ip->ihl < 5)
			return PARSE_MALFORMED;
		f->family = 4;
		f->proto = ip->protocol;
		f->l4_off = L3_OFF + ip->ihl * 4;
		addr_from_v4(&f->saddr, ip->saddr);
		addr_from_v4(&f->daddr, ip->daddr);
		if (ip->ihl == 5 + DSR_OPT4_LEN / 4) {
			struct dsr_opt4 *o = (void *)(ip + 1);

			if ((void *)(o + 1) <= end && o->type == DSR_OPT4_TYPE && o->len == DSR_OPT4_LEN)
				f->dsr = 1;
		}
		if (ip->frag_off & bpf_htons(0x1fff)) /* offset: a later fragment */
			f->frag = FRAG_LATER;
		else if (ip->frag_off & bpf_htons(0x2000)) /* more fragments */
			f->frag = FRAG_FIRST;
		*frag_id = ip->id;
		return 0;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return parse_more(skb, L3_OFF + sizeof(*ip6));
		f->family = 6;
		f->proto = ip6->nexthdr;
		f->l4_off = L3_OFF + sizeof(*ip6);
		addr_from_v6(&f->saddr, ip6->saddr.in6_u.u6_addr32);
		addr_from_v6(&f->daddr, ip6->daddr.in6_u.u6_addr32);
		if (addr_is_v4(&f->saddr) || addr_is_v4(&f->daddr))
			return PARSE_MALFORMED;
		if (f->proto == IPPROTO_DSTOPTS) {
			struct dsr_hdr6 *h = (void *)(ip6 + 1);

			/* netcube's own, only (never on a fragment): any
			 * other is an extension header parse_flow does not
			 * read past */
			if ((void *)(h + 1) <= end && h->nexthdr != IPPROTO_FRAGMENT && h->hdrlen == DSR_HDR6_LEN / 8 - 1 &&
			    h->type == DSR_OPT6_TYPE && h->len == DSR_OPT6_LEN) {
				f->proto = h->nexthdr;
				f->l4_off += DSR_HDR6_LEN;
				f->dsr = 1;
			}
		}
		if (f->proto == IPPROTO_FRAGMENT) {
			struct frag_hdr6 *fh = (void *)(ip6 + 1);

			if ((void *)(fh + 1) > end)
				return parse_more(skb, L3_OFF + sizeof(*ip6) + sizeof(*fh));
			f->proto = fh->nexthdr;
			f->l4_off += sizeof(*fh);
			f->frag = (fh->frag_off & bpf_htons(0xfff8)) ? FRAG_LATER : FRAG_FIRST;
			*frag_id = fh->id;
		}
		return 0;
	}
	return PARSE_NOT_IP;
}

/* ipv6_ext_header says whether nexthdr is an IPv6 extension header (RFC
 * 8200, 4, and the IANA list): hop-by-hop, routing, fragment, AH,
 * destination options, mobility, HIP, shim6, the two experimental. ESP is
 * not (its payload is opaque whatever parses it); neither is "no next
 * header", which carries nothing. */
static always_inline int ipv6_ext_header(__u8 nexthdr)
{
	switch (nexthdr) {
	case 0: case 43: case 44: case 51: case 60: case 135: case 139: case 140: case 253: case 254:
		return 1;
	}
	return 0;
}

/* parse_flow_direct is parse_flow on the skb's linear part:
 * PARSE_AGAIN when a header it needs lies past it. */
static always_inline int parse_flow_direct(struct __sk_buff *skb, struct flow *f)
{
	void *data, *end;
	__u32 frag_id = 0;
	int miss;

	f->tcp_flags = 0;
	f->sctp_chunk = 0;
	f->sport = f->dport = 0;
	miss = parse_l3(skb, f, &frag_id);
	if (miss)
		return miss;
	if (f->family == 6 && ipv6_ext_header(f->proto))
		return PARSE_EXT_HEADER;
	if (f->proto != IPPROTO_TCP && f->proto != IPPROTO_UDP && f->proto != IPPROTO_SCTP)
		return PARSE_NO_PORTS;
	if (f->frag == FRAG_LATER)
		return frag_ports_of(&f->saddr, &f->daddr, frag_id, f->proto, &f->sport, &f->dport) ? PARSE_FRAG_UNSEEN : 0;

	/* TCP, UDP and SCTP all start with the two ports; a first fragment
	 * too short to hold its L4 header is malformed (RFC 1858's tiny
	 * fragments hide a TCP header's flags). */
	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	__be16 *ports = data + f->l4_off;
	if ((void *)(ports + 2) > end)
		return parse_more(skb, f->l4_off + 4);
	f->sport = ports[0];
	f->dport = ports[1];
	if (f->proto == IPPROTO_TCP) {
		struct tcphdr *tcp = data + f->l4_off;

		if ((void *)(tcp + 1) > end)
			return parse_more(skb, f->l4_off + sizeof(*tcp));
		f->tcp_flags = ((__u8 *)tcp)[13];
	}
	if (f->proto == IPPROTO_SCTP) {
		__u8 *chunk = data + f->l4_off + sizeof(struct sctp_common);

		if ((void *)(chunk + 1) <= end) /* none: an invalid packet, the peer's to drop */
			f->sctp_chunk = *chunk;
		else if (f->l4_off + sizeof(struct sctp_common) < skb->len)
			return PARSE_AGAIN;
	}
	if (f->frag == FRAG_FIRST)
		frag_remember(&f->saddr, &f->daddr, frag_id, f->proto, f->sport, f->dport);
	return 0;
}

/* parse_flow fills f for a TCP/UDP/SCTP packet (or a fragment of one whose
 * first fragment was seen) and returns 0; otherwise it returns why not
 * (enum parse_miss). Headers past the skb's linear part are pulled in
 * (never on the common path: a pull only when a header is not linear,
 * which a stack's own packets always have it) and read again. */
static always_inline int parse_flow(struct __sk_buff *skb, struct flow *f)
{
	int miss = parse_flow_direct(skb, f);
	__u32 len;

	if (miss != PARSE_AGAIN)
		return miss;
	len = skb->len < PARSE_PULL_MAX ? skb->len : PARSE_PULL_MAX;
	if ((long)skb->data_end - (long)skb->data >= len || bpf_skb_pull_data(skb, len))
		return PARSE_MALFORMED;
	miss = parse_flow_direct(skb, f);
	return miss == PARSE_AGAIN ? PARSE_MALFORMED : miss;
}

/* parse_addrs reads the addresses, family and protocol of any IPv4 or
 * IPv6 packet (ICMP and fragments included; an IPv6 extension header is
 * the protocol then): 0, or -1 for anything else. */
static always_inline int parse_addrs(struct __sk_buff *skb, struct flow *f)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end)
			return -1;
		addr_from_v4(&f->saddr, ip->saddr);
		addr_from_v4(&f->daddr, ip->daddr);
		f->family = 4;
		f->proto = ip->protocol;
		return 0;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return -1;
		addr_from_v6(&f->saddr, ip6->saddr.in6_u.u6_addr32);
		addr_from_v6(&f->daddr, ip6->daddr.in6_u.u6_addr32);
		f->family = 6;
		f->proto = ip6->nexthdr;
		return 0;
	}
	return -1;
}

/* link_local_multicast: a packet for the link it is on (224.0.0.0/24, or
 * an IPv6 multicast address of at most link scope: the kernel's MLD
 * reports to ff02::16, whatever the device's flags), never for a pod or a
 * Service. */
static always_inline int link_local_multicast(const struct flow *f)
{
	const __u8 *a = (const __u8 *)&f->daddr.w[f->family == 4 ? 3 : 0];

	if (f->family == 4)
		return a[0] == 224 && a[1] == 0 && a[2] == 0; /* 224.0.0.0/24 */
	return a[0] == 0xff && (a[1] & 0x0f) <= 2;            /* ff0X::, scope <= link */
}
