/* frag.h: fragmented datagrams. Only a datagram's first fragment carries
 * its ports; the others get them here, from the first, so that every
 * fragment of a datagram is translated and routed as its first was (a
 * node whose stack reassembles fragments, as netfilter's conntrack does,
 * would otherwise wait forever for a first fragment the datapath sent
 * elsewhere). Fragments must arrive first-fragment first, as Cilium's
 * fragment tracking also assumes; a later fragment of an unknown datagram
 * is left to the kernel untouched.
 */
#pragma once
#include "common.h"
#include "frag_maps.h"

enum frag_kind : __u8 {
	FRAG_NONE = 0,  /* a whole datagram */
	FRAG_FIRST = 1, /* the first fragment: the L4 header is here */
	FRAG_LATER = 2, /* a later fragment: no L4 header, ports from the first */
};

static always_inline void frag_key_of(struct frag_key *k, const struct nc_addr *saddr,
				      const struct nc_addr *daddr, __u32 id, __u8 proto)
{
	k->saddr = *saddr;
	k->daddr = *daddr;
	k->id = id;
	k->proto = proto;
	k->pad[0] = k->pad[1] = k->pad[2] = 0;
}

/* frag_remember records the ports of a datagram's first fragment. */
static always_inline void frag_remember(const struct nc_addr *saddr, const struct nc_addr *daddr,
					__u32 id, __u8 proto, __be16 sport, __be16 dport)
{
	struct frag_key k;
	struct frag_ports p = {.sport = sport, .dport = dport};

	frag_key_of(&k, saddr, daddr, id, proto);
	bpf_map_update_elem(&frag_datagrams, &k, &p, BPF_ANY);
}

/* frag_ports_of finds the ports of a later fragment's datagram: 0, or -1
 * when its first fragment was not seen here. */
static always_inline int frag_ports_of(const struct nc_addr *saddr, const struct nc_addr *daddr,
				       __u32 id, __u8 proto, __be16 *sport, __be16 *dport)
{
	struct frag_key k;
	struct frag_ports *p;

	frag_key_of(&k, saddr, daddr, id, proto);
	p = bpf_map_lookup_elem(&frag_datagrams, &k);
	if (!p)
		return -1;
	*sport = p->sport;
	*dport = p->dport;
	return 0;
}
