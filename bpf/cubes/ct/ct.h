/* ct.h: the conntrack cube. Pins each per-packet-translated flow to its
 * backend and remembers how to reverse-translate its replies.
 *
 * Two entries per flow in one hash map:
 *   CT_SERVICE {client -> frontend}  : backend id, revNAT id
 *   CT_REPLY   {backend -> client}   : revNAT id (rewrite source to frontend)
 * The policy cube keeps the connections it allowed in the same table, one
 * entry each (CT_POLICY: its verdict and the rules' revision; see
 * cubes/policy/policy.h), with the same states, timeouts and GC.
 * A flow from outside the cluster (NodePort, ExternalIP, LoadBalancer IP) is
 * marked CT_F_EXTERNAL; if its source was translated to this node (SNAT),
 * its reply entry is keyed {backend -> node address:port} and holds the
 * client's address and port (nat_addr, nat_port), and its service entry
 * the node address and port it was given.
 * Lifecycle: both entries of a flow share its state (enum ct_state) and
 * the time of its last packet; an entry is dead once the timeout of its
 * state has passed (ct_expired: the datapath no longer follows it, the
 * agent's GC removes it). A TCP flow is removed by the datapath itself at
 * its close (a RST, or the ACK of the second FIN), so that churn
 * of short connections does not fill the table; a SYN on a flow that was
 * answered or is closing opens a new flow (a reused client port).
 * SCTP is followed by its first chunk's type (parse.h): an ABORT or a
 * SHUTDOWN COMPLETE ends the association (both entries removed, as a
 * TCP RST), an INIT on an answered one starts a new association on the
 * same ports (as a SYN); its timeouts are UDP's (30 s unanswered, 300 s
 * answered), which an idle association's HEARTBEATs (every 30 s by
 * default, net.sctp.hb_interval) keep alive; a lost end is the GC's.
 * The table is a hash map (ct_maps.h says why not an LRU): when it is
 * full, a new flow takes the place of the oldest flow not yet answered
 * (evict.h: early drop), or, when every flow is answered, is refused and
 * counted; no answered flow loses its entries. A flow whose entries are
 * gone all the same (evicted unanswered, or taken by the GC once it was
 * idle past its timeout) is simply load-balanced again on its next
 * packet.
 */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "ct_maps.h"
#include "cubes/monitor/monitor.h"
#include "cubes/monitor/monitor.h"

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

#define CT_ST_FINS (CT_ST_FIN_FWD | CT_ST_FIN_REV)
/* One load of a field another CPU may write meanwhile. */
#define READ_ONCE_U64(x) (*(volatile const __u64 *)&(x))
#define CT_TOUCH_NS 1000000000ULL

static always_inline void ct_count(enum ct_stat stat)
{
	__u64 *n = bpf_map_lookup_elem(&ct_stats, &stat);

	if (n)
		*n += 1;
}


/* ct_answered_state says whether state st of a flow of proto (its entry's
 * flags) is past its opening: TCP's handshake done (for an entry an
 * earlier agent wrote, answered), any other protocol answered. Such a
 * flow has its long timeout and is never evicted (evict.h). */
static always_inline int ct_answered_state(__u64 st, __u8 flags, __u8 proto)
{
	if (proto == IPPROTO_TCP && (flags & CT_F_HANDSHAKE))
		return !!(st & CT_ST_ESTABLISHED);
	return !!(st & CT_ST_REPLIED);
}

/* ct_timeout_ns is how long a flow of proto in state st (its entry's
 * flags) lives after its last packet. */
static always_inline __u64 ct_timeout_ns(__u64 st, __u8 flags, __u8 proto)
{
	__u32 s;

	if (proto == IPPROTO_TCP)
		s = (st & CT_ST_CLOSING) ? ct_timeout_close : ct_answered_state(st, flags, proto) ? ct_timeout_tcp : ct_timeout_syn;
	else /* UDP, and SCTP (see above) */
		s = (st & CT_ST_REPLIED) ? ct_timeout_udp_stream : ct_timeout_udp;
	return (__u64)s * 1000000000ULL;
}

/* ct_expired says whether e's flow has timed out by now. A packet on
 * another CPU may refresh the entry after this one read the clock: its
 * last_ns, later than now, says the flow is live. (Without that check the
 * unsigned difference wraps to a huge age: the datapath re-balanced a live
 * flow, and the GC, whose sweep reads the clock once, removed flows
 * written during the sweep; each was a failed connection under churn.) */
static always_inline int ct_expired(const struct ct_entry *e, __u8 proto, __u64 now)
{
	__u64 last = READ_ONCE_U64(e->last_ns);

	return now > last && now - last > ct_timeout_ns(e->state, e->flags, proto);
}

#include "evict.h" /* (it needs the above) */

/* ct_reopens says whether f, a TCP SYN, starts a new connection on a
 * client port whose old flow was answered or is closing (its close
 * unseen, or not yet timed out): the old entries must not decide where
 * it goes. A SYN on an unanswered flow is the same one, retransmitted. */
static always_inline int ct_reopens(const struct flow *f, const struct ct_entry *e)
{
	int opens = f->proto == IPPROTO_TCP ? flow_is_new(f)
		  : f->proto == IPPROTO_SCTP && f->sctp_chunk == SCTP_CHUNK_INIT;

	return opens && (e->state & (CT_ST_REPLIED | CT_ST_CLOSING));
}

/* sctp_ends says whether SCTP packet f ends its association. */
static always_inline int sctp_ends(const struct flow *f)
{
	return f->sctp_chunk == SCTP_CHUNK_ABORT || f->sctp_chunk == SCTP_CHUNK_SHUTDOWN_COMPLETE;
}

/* ct_packet_state: what packet f, going way dir, tells of its flow. */
static always_inline __u64 ct_packet_state(const struct flow *f, __u8 dir)
{
	__u64 st = dir == CT_REPLY ? CT_ST_REPLIED : 0;

	if (f->proto == IPPROTO_SCTP && sctp_ends(f))
		return st | CT_ST_CLOSING;
	if (f->proto != IPPROTO_TCP)
		return st;
	if (f->tcp_flags & TCP_FLAG_RST)
		st |= CT_ST_CLOSING;
	if (f->tcp_flags & TCP_FLAG_FIN)
		st |= dir == CT_SERVICE ? CT_ST_FIN_FWD : CT_ST_FIN_REV;
	return st;
}

/* ct_establishes: what TCP packet f adds to a flow whose state, with
 * what the packet itself adds, is st: CT_ST_ESTABLISHED for a packet
 * without SYN or RST once the flow is answered, either way (a DSR node
 * sees one way only). */
static always_inline __u64 ct_establishes(__u64 st, const struct flow *f)
{
	if (f->proto != IPPROTO_TCP || !(st & CT_ST_REPLIED) || (f->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_RST)))
		return 0;
	return CT_ST_ESTABLISHED;
}

/* ct_news says whether packet f (way dir) is news for entry e: a state
 * it does not hold yet, the flow's end, or its time to be refreshed. The
 * reply path looks the flow's other entry up only then. */
static always_inline int ct_news(const struct ct_entry *e, const struct flow *f, __u8 dir, __u64 now)
{
	__u64 add = ct_packet_state(f, dir);

	add |= ct_establishes(e->state | add, f);
	return (add & ~e->state) || (add & CT_ST_CLOSING) || (e->state & CT_ST_FINS) == CT_ST_FINS ||
	       now - e->last_ns > CT_TOUCH_NS;
}

/* ct_ends says whether packet f, going way dir, is the last of a TCP
 * flow whose state was before: a RST, or, after FINs both ways, the ACK of
 * the second FIN, which goes the other way. The side that sent the second
 * FIN may still have a packet of its own in flight behind it (its ACK of
 * the first FIN, sent on another CPU and overtaken): that one is not the
 * end, or the flow would be gone before its true last ACK, which would
 * then be balanced afresh as a new flow. */
static always_inline int ct_ends(const struct flow *f, __u8 dir, __u64 before)
{
	if (f->tcp_flags & TCP_FLAG_RST)
		return 1;
	if ((before & CT_ST_FINS) != CT_ST_FINS || (f->tcp_flags & TCP_FLAG_FIN))
		return 0;
	return (dir == CT_REPLY) != !!(before & CT_ST_FIN2_REV);
}

static always_inline struct ct_scratch *ct_scratch_area(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&ct_scratch, &zero);
}

/* ct_account_flow counts packet f of the entry of direction dir (ct_acct:
 * packets, bytes as it arrived), while the agent traces: nothing else is
 * done per packet for the counters. */
static always_inline void ct_account_flow(const struct flow *f, __u8 dir)
{
	struct ct_scratch *s;
	struct ct_acct *a;

	if (!mon_wanted(MON_F_TRACE) || !(s = ct_scratch_area()))
		return;
	ct_key_from_flow(&s->key, f, dir);
	s->one.packets = 1;
	s->one.bytes = mon_packet_len();
	a = bpf_map_lookup_elem(&ct_acct, &s->key);
	if (!a) {
		bpf_map_update_elem(&ct_acct, &s->key, &s->one, BPF_NOEXIST);
		return;
	}
	__sync_fetch_and_add(&a->packets, 1);
	__sync_fetch_and_add(&a->bytes, s->one.bytes);
}

/* ct_take_acct moves the counters of the entry keyed k into way of s (0:
 * as sent, 1: replies), forgetting them. */
static always_inline void ct_take_acct(struct ct_scratch *s, const struct ct_key *k, int way)
{
	struct ct_acct *c = bpf_map_lookup_elem(&ct_acct, k);

	s->packets[way & 1] = c ? c->packets : 0;
	s->bytes[way & 1] = c ? c->bytes : 0;
	if (c)
		bpf_map_delete_elem(&ct_acct, k);
}

/* ct_flow_end reports the end of the flow whose entries are a and b (b:
 * NULL if gone) with their counters, while the agent traces. */
static always_inline void ct_flow_end(const struct ct_key *a, const struct ct_key *b)
{
	const struct ct_key *svc = a, *rep = b;
	struct ct_scratch *s;

	if (!mon_wanted(MON_F_TRACE) || !(s = ct_scratch_area()))
		return;
	if (b && a->dir != CT_SERVICE) {
		svc = b;
		rep = a;
	}
	ct_take_acct(s, svc, 0);
	if (rep)
		ct_take_acct(s, rep, 1);
	else
		s->packets[1] = s->bytes[1] = 0;
	mon_flow_end(MON_TR_FLOW_END, &svc->saddr, &svc->daddr, svc->sport, svc->dport, svc->proto, s->packets, s->bytes);
}

/* ct_touch records packet f, going way dir, in its flow's entry e and (if
 * known) the other one: its state and time. It returns 1 when the packet
 * ends the flow (ct_ends). */
static always_inline int ct_touch(struct ct_entry *e, struct ct_entry *other, const struct flow *f, __u8 dir,
				  __u64 now)
{
	__u64 before = e->state, add = ct_packet_state(f, dir), after;

	if (e->flags & CT_F_DSR) {
		/* One way seen only: a client's packet past its SYN says the
		 * backend answered; this way's FIN, that the flow closes. */
		if (dir == CT_SERVICE && f->proto == IPPROTO_TCP && !(f->tcp_flags & TCP_FLAG_SYN))
			add |= CT_ST_REPLIED;
		if (f->proto == IPPROTO_TCP && (f->tcp_flags & TCP_FLAG_FIN))
			add |= CT_ST_CLOSING;
	}
	add |= ct_establishes(before | add, f);
	after = before | add;

	if ((after & CT_ST_FINS) == CT_ST_FINS) {
		after |= CT_ST_CLOSING;
		if ((before & CT_ST_FINS) != CT_ST_FINS && dir == CT_REPLY)
			after |= CT_ST_FIN2_REV;
	}
	if (after != before) {
		__sync_fetch_and_or(&e->state, after);
		if (other)
			__sync_fetch_and_or(&other->state, after);
	}
	if (after != before || now - e->last_ns > CT_TOUCH_NS) {
		e->last_ns = now;
		if (other)
			other->last_ns = now;
	}
	if (f->proto == IPPROTO_SCTP)
		return sctp_ends(f);
	if (f->proto != IPPROTO_TCP)
		return 0;
	return ct_ends(f, dir, before);
}

/* ct_observe records packet f, going way dir, in its flow's entry e and
 * (if known) the other one, and counts it while the agent traces. It returns 1 when the packet ends the flow
 * (ct_ends): the caller removes both entries (ct_remove) once it has read
 * what it needs from them. */
static always_inline int ct_observe(struct ct_entry *e, struct ct_entry *other, const struct flow *f, __u8 dir,
				      __u64 now)
{
	ct_account_flow(f, dir);
	return ct_touch(e, other, f, dir, now);
}

/* ct_remove deletes a closed flow's two entries. */
static always_inline void ct_remove(const struct ct_key *a, const struct ct_key *b)
{
	ct_flow_end(a, b);
	bpf_map_delete_elem(&ct_flows, a);
	if (b)
		bpf_map_delete_elem(&ct_flows, b);
	ct_count(CT_STAT_CLOSED);
}

static always_inline struct ct_entry *ct_lookup(const struct flow *f, __u8 dir)
{
	struct ct_key k;
	struct ct_entry *e;

	ct_key_from_flow(&k, f, dir);
	e = bpf_map_lookup_elem(&ct_flows, &k);
	if (e)
		mon_crossed(MON_CUBE_CT);
	return e;
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
	__u64 now = nc_now();
	struct ct_entry e = {
		.backend_id = backend_id,
		.rev_nat_id = rev_nat_id,
		.last_ns = now,
		.flags = flags | CT_F_HANDSHAKE,
	};
	struct ct_key k;
	int err;

	ct_count(CT_STAT_CREATED);

	ct_reply_key(&k, baddr, bport, &f->saddr, f->sport, f->proto);
	if (flags & CT_F_SNAT) {
		e.nat_addr = f->saddr; /* the reply goes back to the client */
		e.nat_port = f->sport;
		ct_reply_key(&k, baddr, bport, snat_addr, snat_port, f->proto);
	}
	err = ct_insert(&k, &e);
	if (err)
		goto failed;
	if (flags & CT_F_SNAT) {
		e.nat_addr = *snat_addr; /* later packets keep their node port */
		e.nat_port = snat_port;
	}
	ct_key_from_flow(&k, f, CT_SERVICE);
	err = ct_insert(&k, &e);
	if (!err) {
		struct ct_evict_slot *slot = ct_claim_slot();

		/* Early drop's ring learns the flow (its reply key written
		 * into the slot itself: no stack for a second key). */
		if (slot) {
			if (flags & CT_F_SNAT)
				ct_reply_key(&slot->other, baddr, bport, snat_addr, snat_port, f->proto);
			else
				ct_reply_key(&slot->other, baddr, bport, &f->saddr, f->sport, f->proto);
			slot->key = k;
		}
		mon_crossed(MON_CUBE_CT);
		mon_new_flow();
		ct_account_flow(f, CT_SERVICE);
		return 0;
	}
	/* (A reply entry without its service entry is left to the GC: its
	 * removal here costs the programs' stack more than they have.) */
failed:
	ct_count(CT_STAT_INSERT_FAILED);
	return err;
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

/* ct_reply_of returns the reply half of the service entry ct of flow f
 * (its key in *k), or NULL: the reply entry from the backend baddr:bport,
 * with the same reverse-NAT id and, for a SNATed flow, keyed on the SNAT
 * address and remembering this client. */
static always_inline struct ct_entry *ct_reply_of(const struct flow *f, const struct ct_entry *ct,
						  const struct nc_addr *baddr, __be16 bport, struct ct_key *k)
{
	struct ct_entry *r;

	if (ct->flags & CT_F_SNAT)
		ct_reply_key(k, baddr, bport, &ct->nat_addr, ct->nat_port, f->proto);
	else
		ct_reply_key(k, baddr, bport, &f->saddr, f->sport, f->proto);
	r = bpf_map_lookup_elem(&ct_flows, k);
	if (!r || r->rev_nat_id != ct->rev_nat_id)
		return NULL;
	if ((ct->flags & CT_F_SNAT) && !(addr_equal(&r->nat_addr, &f->saddr) && r->nat_port == f->sport))
		return NULL;
	return r;
}

/* ct_established returns the live service entry of flow f (key in *sk)
 * and its reply half (in *r, key in *rk) to backend baddr:bport, or NULL:
 * none, half gone, timed out, or a SYN reopening the client port. */
static always_inline struct ct_entry *ct_established(const struct flow *f, struct ct_entry *s,
						     const struct nc_addr *baddr, __be16 bport,
						     struct ct_entry **r, struct ct_key *rk, __u64 now)
{
	if (!s || ct_expired(s, f->proto, now) || ct_reopens(f, s))
		return NULL;
	*r = ct_reply_of(f, s, baddr, bport, rk);
	return *r ? s : NULL;
}
