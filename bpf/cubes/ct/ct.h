/* ct.h: the conntrack cube. Pins each per-packet-translated flow to its
 * backend and remembers how to reverse-translate its replies.
 *
 * Two entries per flow in one LRU map:
 *   CT_SERVICE {client -> frontend}  : backend id, revNAT id
 *   CT_REPLY   {backend -> client}   : revNAT id (rewrite source to frontend)
 * A flow from outside the cluster (NodePort, ExternalIP, LoadBalancer IP) is
 * marked CT_F_EXTERNAL; if its source was translated to this node (SNAT),
 * its reply entry is keyed {backend -> node address:port} and holds the
 * client's address and port (nat_addr, nat_port), and its service entry
 * the node address and port it was given.
 * LRU eviction bounds the table; a flow whose entry was evicted is simply
 * load-balanced again on its next packet.
 */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "ct_maps.h"

static always_inline void ct_key_from_flow(struct ct_key *k, const struct flow *f, __u8 dir)
{
	k->saddr = f->saddr;
	k->daddr = f->daddr;
	k->sport = f->sport;
	k->dport = f->dport;
	k->proto = f->proto;
	k->dir = dir;
	k->pad = 0;
}

static always_inline struct ct_entry *ct_lookup(const struct flow *f, __u8 dir)
{
	struct ct_key k;

	ct_key_from_flow(&k, f, dir);
	return bpf_map_lookup_elem(&ct_flows, &k);
}

/* ct_reply_key is the key of the reply entry of a flow translated to
 * backend baddr:bport, whose replies go to to:to_port (the client, or the
 * address it was SNATed to). */
static always_inline void ct_reply_key(struct ct_key *k, const struct nc_addr *baddr, __be16 bport,
				       const struct nc_addr *to, __be16 to_port, __u8 proto)
{
	k->saddr = *baddr;
	k->daddr = *to;
	k->sport = bport;
	k->dport = to_port;
	k->proto = proto;
	k->dir = CT_REPLY;
	k->pad = 0;
}

/* ct_forget_reply drops the reply entry a new flow f could be mistaken for:
 * a direct connection that reuses the client port of an ended Service flow
 * to the same backend must not have its replies reverse-NATed. */
static always_inline void ct_forget_reply(const struct flow *f)
{
	struct ct_key k;

	ct_reply_key(&k, &f->daddr, f->dport, &f->saddr, f->sport, f->proto);
	bpf_map_delete_elem(&ct_flows, &k);
}

/* ct_create_flow records a new service flow from f (still addressed to the
 * frontend) to backend b. The reply entry is written first so a reply can
 * never arrive before the entry that reverse-translates it. With CT_F_SNAT
 * in flags, the flow's source becomes snat_addr:snat_port (this node): the
 * reply entry is keyed on that and remembers the client, and the service
 * entry remembers the SNAT address for the flow's later packets. */
static always_inline int ct_create_flow(const struct flow *f, __u32 backend_id,
					const struct nc_addr *baddr, __be16 bport, __u32 rev_nat_id,
					__u8 flags, const struct nc_addr *snat_addr, __be16 snat_port)
{
	struct ct_entry e = {
		.backend_id = backend_id,
		.rev_nat_id = rev_nat_id,
		.created_ns = nc_now(),
		.flags = flags,
	};
	struct ct_key k;
	int err;

	ct_reply_key(&k, baddr, bport, &f->saddr, f->sport, f->proto);
	if (flags & CT_F_SNAT) {
		e.nat_addr = f->saddr; /* the reply goes back to the client */
		e.nat_port = f->sport;
		ct_reply_key(&k, baddr, bport, snat_addr, snat_port, f->proto);
	}
	err = bpf_map_update_elem(&ct_flows, &k, &e, BPF_ANY);
	if (err)
		return err;
	if (flags & CT_F_SNAT) {
		e.nat_addr = *snat_addr; /* later packets keep their node port */
		e.nat_port = snat_port;
	}
	ct_key_from_flow(&k, f, CT_SERVICE);
	return bpf_map_update_elem(&ct_flows, &k, &e, BPF_ANY);
}

/* ct_create records a flow translated only in its destination. */
static always_inline int ct_create(const struct flow *f, __u32 backend_id,
				   const struct nc_addr *baddr, __be16 bport, __u32 rev_nat_id)
{
	return ct_create_flow(f, backend_id, baddr, bport, rev_nat_id, 0, NULL, 0);
}

/* ct_create_external records a flow from outside the cluster (or a
 * hairpin), with more flags: CT_F_SNAT (to snat_addr:snat_port) and/or
 * CT_F_HOST. */
static always_inline int ct_create_external(const struct flow *f, __u32 backend_id,
					    const struct nc_addr *baddr, __be16 bport,
					    __u32 rev_nat_id, __u8 flags,
					    const struct nc_addr *snat_addr, __be16 snat_port)
{
	return ct_create_flow(f, backend_id, baddr, bport, rev_nat_id, CT_F_EXTERNAL | flags,
			      snat_addr, snat_port);
}

/* ct_reply_taken says whether a reply entry exists for backend -> addr:port
 * (a SNAT port already in use towards that backend). */
static always_inline int ct_reply_taken(const struct nc_addr *baddr, __be16 bport,
					const struct nc_addr *addr, __be16 port, __u8 proto)
{
	struct ct_key k;

	ct_reply_key(&k, baddr, bport, addr, port, proto);
	return bpf_map_lookup_elem(&ct_flows, &k) != NULL;
}

/* ct_reply_matches says whether the service entry ct of flow f still has
 * its reply half: the reply entry from the backend baddr:bport, with the
 * same reverse-NAT id and, for a SNATed flow, keyed on the SNAT address
 * and remembering this client. */
static always_inline int ct_reply_matches(const struct flow *f, const struct ct_entry *ct,
					  const struct nc_addr *baddr, __be16 bport)
{
	struct ct_key k;
	struct ct_entry *r;

	if (ct->flags & CT_F_SNAT)
		ct_reply_key(&k, baddr, bport, &ct->nat_addr, ct->nat_port, f->proto);
	else
		ct_reply_key(&k, baddr, bport, &f->saddr, f->sport, f->proto);
	r = bpf_map_lookup_elem(&ct_flows, &k);
	if (!r || r->rev_nat_id != ct->rev_nat_id)
		return 0;
	if (ct->flags & CT_F_SNAT)
		return addr_equal(&r->nat_addr, &f->saddr) && r->nat_port == f->sport;
	return 1;
}
