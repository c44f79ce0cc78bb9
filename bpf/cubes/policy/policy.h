/* policy.h: the policy cube. Kubernetes NetworkPolicy for this node's
 * pods, judged on the real endpoints of a packet (after load balancing,
 * before any reverse translation): egress when a pod sends, ingress when
 * a pod receives.
 *
 * A pod no policy selects is not in pol_endpoints: one lookup, and the
 * packet goes on. For a selected pod, a connection's first packet is
 * judged by the rules of the isolated direction (the peer's identity from
 * pol_hosts, or else pol_peers, then at most four lookups in pol_rules,
 * and for the protocol's port ranges two in pol_entries: {peer, any peer}
 * x {protocol, any protocol}) and, allowed, recorded in
 * conntrack (a CT_POLICY entry, keyed either way: one lookup whichever
 * way a packet goes) with the verdict and the rules' revision; its later
 * packets and its replies pass on that record, and keep its state and
 * time as conntrack's other entries do (timeouts, the GC, removal at a
 * TCP close). Under a newer revision (the agent changed the rules) a
 * connection's next packet is judged again, as its first was: a revoked
 * policy cuts it there. A packet of a connection not recorded (one older
 * than the policy) is judged as a first packet. In a direction no policy
 * isolates, the first packet is recorded too, for its replies; of TCP
 * only the SYN, FIN and RST are looked up there (a TCP connection whose
 * last ACK goes that way is left closing, for the GC). A packet between
 * two pods of this node is judged for both on one lookup of its record
 * (the memo, below).
 * Traffic from this node itself (kubelet's probes) is always allowed.
 */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "policy_maps.h"
#include "cubes/ct/ct.h"
#include "cubes/monitor/monitor.h"

/* pol_open: what pol_judge answers for a direction no policy isolates. */
#define POL_OPEN 0xff

static always_inline __u32 pol_rev_now(void)
{
	__u32 zero = 0;
	struct pol_rev *r = bpf_map_lookup_elem(&pol_revision, &zero);

	return r ? r->rev : 0;
}

/* addr_above orders addresses (any total order: a key's lower end). */
static always_inline int addr_above(const struct nc_addr *a, const struct nc_addr *b)
{
	__u64 a0 = ((__u64)a->w[0] << 32) | a->w[1], b0 = ((__u64)b->w[0] << 32) | b->w[1];
	__u64 a1 = ((__u64)a->w[2] << 32) | a->w[3], b1 = ((__u64)b->w[2] << 32) | b->w[3];

	return a0 != b0 ? a0 > b0 : a1 > b1;
}

/* pol_conn_key keys f's connection whichever way f goes: its lower end
 * first. Returns whether f's source is the key's daddr. */
static always_inline int pol_conn_key(struct ct_key *k, const struct flow *f)
{
	int swapped = addr_equal(&f->saddr, &f->daddr) ? f->sport > f->dport : addr_above(&f->saddr, &f->daddr);

	k->saddr = swapped ? f->daddr : f->saddr;
	k->daddr = swapped ? f->saddr : f->daddr;
	k->sport = swapped ? f->dport : f->sport;
	k->dport = swapped ? f->sport : f->dport;
	k->proto = f->proto;
	k->dir = CT_POLICY;
	k->pad = 0;
	return swapped;
}

/* The lookups' keys are in the per-CPU scratch s (pol_scratch). */
static always_inline __u32 pol_identity_of(struct pol_scratch *s, const struct nc_addr *a)
{
	struct pol_peer *p = bpf_map_lookup_elem(&pol_hosts, a);

	if (p)
		return p->identity;
	s->peer.prefixlen = 128;
	s->peer.addr = *a;
	p = bpf_map_lookup_elem(&pol_peers, &s->peer);
	return p ? p->identity : POL_WORLD;
}

/* pol_entry_find: the entry for peer with proto on port, exact in
 * pol_rules or, for a protocol's port ranges, in pol_entries (NULL: none). */
static always_inline struct pol_entry *pol_entry_find(struct pol_scratch *s, __u32 peer, __u8 proto, __be16 port)
{
	struct pol_entry *e;

	s->rule.peer = peer;
	s->rule.proto = proto;
	s->rule.port = port;
	e = bpf_map_lookup_elem(&pol_rules, &s->rule);
	if (e || !proto)
		return e;
	return bpf_map_lookup_elem(&pol_entries, &s->rule);
}

/* pol_found: the verdict of entry e, found by a lookup of kind match. */
#define pol_found(e, match) ((e)->allow ? (match) : MON_POL_DENY)

/* pol_allows looks the rules up: the peer's identity or any peer, the
 * protocol (the port, or a range holding it) or every protocol. The
 * first entry found decides: the rule it is (enum mon_pol_match), or
 * MON_POL_DENY for one that denies; MON_POL_NONE when none is found. */
static always_inline __u8 pol_allows(struct pol_scratch *s, __u32 rule_set, __u8 dir, __u32 peer, __u8 proto,
				     __be16 port)
{
	struct pol_entry *e;

	__builtin_memset(&s->rule, 0, sizeof(s->rule));
	s->rule.prefixlen = (enum pol_entry_bits)(POL_ENTRY_BITS + 16);
	s->rule.rule_set = rule_set;
	s->rule.dir = dir;
	e = pol_entry_find(s, peer, proto, port);
	if (e)
		return pol_found(e, MON_POL_PEER_PORT);
	e = pol_entry_find(s, peer, 0, 0);
	if (e)
		return pol_found(e, MON_POL_PEER_ALL);
	e = pol_entry_find(s, POL_ANY_PEER, proto, port);
	if (e)
		return pol_found(e, MON_POL_ANY_PORT);
	e = pol_entry_find(s, POL_ANY_PEER, 0, 0);
	if (e)
		return pol_found(e, MON_POL_ANY_ALL);
	return MON_POL_NONE;
}

/* pol_denies: whether a verdict of pol_allows drops the packet. */
static always_inline int pol_denies(__u8 match)
{
	return match == MON_POL_NONE || match == MON_POL_DENY;
}

static always_inline void pol_count_drop(__u32 endpoint, __u32 reason)
{
	struct pol_drop_key k = {.endpoint = endpoint, .reason = reason};
	__u64 one = 1, *n = bpf_map_lookup_elem(&pol_drops, &k);

	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&pol_drops, &k, &one, BPF_NOEXIST);
}

/* pol_report reports a policy's verdict on f (match: the rule that
 * allowed it; MON_POL_NONE or MON_POL_DENY: dropped, and counted). */
static always_inline void pol_report(struct __sk_buff *skb, const struct flow *f, __u8 dir, __u32 endpoint,
				     __u32 peer, __u8 match)
{
	struct mon_detail d = {.type = MON_EV_TRACE, .trace = MON_TR_POLICY, .pol_dir = dir,
			       .endpoint = endpoint, .peer = peer, .match = match};

	if (pol_denies(match)) {
		d.type = MON_EV_DROP;
		d.trace = MON_TR_NONE;
		d.drop = dir == POL_EGRESS ? MON_DROP_POLICY_EGRESS : MON_DROP_POLICY_INGRESS;
		mon_note_drop_detail(skb, f, &d);
		return;
	}
	if (mon_wanted(MON_F_POLICY))
		mon_report(skb, f, f->point, &d);
}

/* pol_judge judges, for endpoint ep, a connection from src to dst:port
 * in which ep is the source (role POL_EGRESS) or the destination: the
 * rule that allows it (enum mon_pol_match), MON_POL_NONE, or POL_OPEN
 * when no policy isolates ep that way (s->peer_id: the peer's identity). */
static always_inline __u8 pol_judge(struct pol_scratch *s, const struct pol_endpoint *ep, __u8 role,
				    const struct nc_addr *src, const struct nc_addr *dst, __u8 proto, __be16 port)
{
	if (!(ep->flags & (role == POL_EGRESS ? POL_ISOLATED_EGRESS : POL_ISOLATED_INGRESS)))
		return POL_OPEN;
	s->peer_id = pol_identity_of(s, role == POL_EGRESS ? dst : src);
	if (role == POL_INGRESS && s->peer_id == POL_HOST)
		return MON_POL_HOST;
	return pol_allows(s, ep->rule_set, role, s->peer_id, proto, port);
}

/* pol_record writes the conntrack entry of a connection f opens (keyed
 * s->key), allowed on side s->bit under rules s->rev. A full table
 * refuses it (counted): the packet still goes, but its replies may then
 * be judged as connections of their own. */
static always_inline void pol_record(struct pol_scratch *s, const struct flow *f)
{
	__builtin_memset(&s->entry, 0, sizeof(s->entry));
	s->entry.last_ns = s->now;
	s->entry.state = ct_packet_state(f, CT_SERVICE);
	s->entry.pol_verdict = s->bit | (s->swapped ? CT_POL_SWAPPED : 0);
	s->entry.pol_rev = s->rev;
	s->entry.flags = CT_F_HANDSHAKE;
	ct_count(CT_STAT_CREATED);
	if (ct_insert(&s->key, &s->entry))
		ct_count(CT_STAT_INSERT_FAILED);
	else
		ct_note_unanswered(&s->key);
}

/* The memo. A packet between two pods of this node is checked twice in
 * one program run: egress for its sender, then ingress for its receiver,
 * on the same conntrack entry. When the sender's check finds that entry's
 * verdict, under the current rules, already allows the receiver's side
 * too, it leaves the key in the memo and the receiver's check passes the
 * packet on it, before any lookup of its own (not even the receiver's
 * pol_endpoints entry). A verdict is a function of the rules and the
 * packet's addresses, ports and protocol only, so a memo under the current
 * revision is right for any packet with its key and direction; it is used
 * once. The sender's check has already moved the connection's state with
 * the packet (the entry is one for both sides, and a TCP packet's state is
 * the same whichever side records it), and removed the entry when the
 * packet ends the connection: nothing is left for the receiver's to do. */
static always_inline int pol_memo_key_equal(const struct ct_key *a, const struct ct_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	_Static_assert(sizeof(struct ct_key) == 40, "ct_key is five words");
	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

/* pol_receiver_passes: whether entry e's verdict, under rules s->rev,
 * already allows the side that receives a packet going e's way s->reply. */
static always_inline int pol_receiver_passes(const struct pol_scratch *s, const struct ct_entry *e)
{
	__u8 receiver = s->reply ? CT_POL_EGRESS : CT_POL_INGRESS;

	return e->pol_rev == s->rev && (e->pol_verdict & receiver);
}

/* pol_memo_leave: after an egress check that passed f on an entry whose
 * verdict allows its receiver too. The memo is s->key and s->swapped as
 * this check left them: nothing is copied, so a packet that leaves the
 * node pays nothing more. */
static always_inline void pol_memo_leave(struct pol_scratch *s, const struct flow *f)
{
	s->memo_rev = s->rev;
	s->memo_flags = f->tcp_flags;
	s->memo_valid = 1;
}

/* pol_memo_take: whether an ingress check of f may pass it on the memo
 * (rules s->rev); the memo is spent either way. A packet whose TCP flags
 * differ from those of the one that left the memo is another packet (the
 * memo's own was lost on its way): with a SYN, FIN or RST it would move
 * the connection's state, so it is judged in full. */
static always_inline int pol_memo_take(struct pol_scratch *s, const struct flow *f)
{
	__u8 swapped;

	if (!s->memo_valid)
		return 0;
	s->memo_valid = 0;
	if (s->memo_rev != s->rev)
		return 0;
	swapped = pol_conn_key(&s->next_key, f);
	return swapped == s->swapped && s->memo_flags == f->tcp_flags && pol_memo_key_equal(&s->next_key, &s->key);
}

/* pol_check judges f, a packet of skb between real endpoints, for the pod
 * on side dir of it (POL_EGRESS: its source; POL_INGRESS: its
 * destination). Returns 1 to let it go on, 0 to drop it (counted and
 * reported). */
static always_inline int pol_check(struct __sk_buff *skb, const struct flow *f, __u8 dir)
{
	const struct nc_addr *self = dir == POL_EGRESS ? &f->saddr : &f->daddr;
	struct pol_endpoint *ep;
	struct pol_scratch *s;
	struct ct_entry *e;
	__u32 zero = 0;
	__u8 match;

	if (dir == POL_EGRESS) {
		ep = bpf_map_lookup_elem(&pol_endpoints, self);
		if (!ep)
			return 1; /* no policy selects the pod */
	}
	s = bpf_map_lookup_elem(&pol_scratch, &zero);
	if (!s)
		return 0;
	s->rev = pol_rev_now();
	if (dir == POL_EGRESS) {
		s->memo_valid = 0;
	} else {
		if (pol_memo_take(s, f))
			return 1;
		ep = bpf_map_lookup_elem(&pol_endpoints, self);
		if (!ep)
			return 1; /* no policy selects the pod */
	}
	/* In a direction no policy isolates, a TCP packet passes whatever its
	 * connection: only its opening and its end (SYN, FIN, RST) are
	 * recorded, for the other way's sake (whose packets keep the entry's
	 * time). */
	if (f->proto == IPPROTO_TCP && !(f->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_FIN | TCP_FLAG_RST)) &&
	    !(ep->flags & (dir == POL_EGRESS ? POL_ISOLATED_EGRESS : POL_ISOLATED_INGRESS)))
		return 1;
	mon_crossed(MON_CUBE_POLICY);
	s->swapped = pol_conn_key(&s->key, f);
	s->now = nc_now();
	s->peer_id = 0;
	e = bpf_map_lookup_elem(&ct_flows, &s->key);
	s->reply = e && s->swapped != !!(e->pol_verdict & CT_POL_SWAPPED);
	if (e && (ct_expired(e, f->proto, s->now) || (!s->reply && ct_reopens(f, e))))
		e = NULL; /* over: f opens a connection of its own */
	if (!e)
		s->reply = 0;
	/* The pod is its connection's source (role POL_EGRESS) when it sends
	 * the connection's way or receives its replies. A packet of a known
	 * connection passes on the verdict its side holds under these rules;
	 * one given under other rules, or none yet from this side, is judged
	 * now, as its first packet was (the connection's way). A packet of no
	 * known connection (its first, or one of a connection older than the
	 * records) is judged as sent. */
	s->role = (dir == POL_EGRESS) != s->reply ? POL_EGRESS : POL_INGRESS;
	s->bit = s->role == POL_EGRESS ? CT_POL_EGRESS : CT_POL_INGRESS;
	if (e && e->pol_rev == s->rev && (e->pol_verdict & s->bit))
		goto known;
	if (s->reply)
		match = pol_judge(s, ep, s->role, &f->daddr, &f->saddr, f->proto, f->sport);
	else
		match = pol_judge(s, ep, s->role, &f->saddr, &f->daddr, f->proto, f->dport);
	if (match != POL_OPEN)
		pol_report(skb, f, s->role, ep->id, s->peer_id, match);
	if (pol_denies(match)) {
		pol_count_drop(ep->id, s->role == POL_EGRESS ? POL_DROP_EGRESS : POL_DROP_INGRESS);
		return 0;
	}
	if (!e) {
		/* In a direction no policy isolates, only a connection's
		 * opening packet is recorded, for its replies. */
		if (match != POL_OPEN || flow_is_new(f))
			pol_record(s, f);
		return 1;
	}
	if (e->pol_rev != s->rev) {
		e->pol_verdict = s->bit | (e->pol_verdict & CT_POL_SWAPPED);
		e->pol_rev = s->rev;
	} else {
		e->pol_verdict |= s->bit;
	}
known:
	/* The packet that ends a TCP connection is the entry's last: removed
	 * by the last side to judge it here. The sender's check removes it
	 * when the receiver needs no check of its own (its verdict is current:
	 * the memo; or it is no pod some policy selects on this node). */
	if (ct_touch(e, NULL, f, s->reply ? CT_REPLY : CT_SERVICE, s->now)) {
		int memo = dir == POL_EGRESS && pol_receiver_passes(s, e);

		if ((dir == POL_INGRESS || memo || !bpf_map_lookup_elem(&pol_endpoints, &f->daddr)) &&
		    !bpf_map_delete_elem(&ct_flows, &s->key))
			ct_count(CT_STAT_CLOSED);
		if (memo)
			pol_memo_leave(s, f);
	} else if (dir == POL_EGRESS && pol_receiver_passes(s, e)) {
		pol_memo_leave(s, f);
	}
	return 1;
}

/* pol_check_quoted judges ICMP error e, which pod-side dir of it sends
 * (POL_EGRESS) or receives (POL_INGRESS), as a packet of the connection it
 * quotes (q: that connection's packet as it was sent, between real
 * endpoints). An error belongs to its connection as a reply does: it
 * passes when the connection is recorded as allowed under the current
 * rules, and it neither moves nor renews the record (an error is no
 * proof the connection lives). When it quotes no such connection (none,
 * one the rules now judge again, or one the pod is not an end of: a
 * forged quote), it is judged as itself: a packet without ports, which
 * only a rule without ports admits. */
static always_inline int pol_check_quoted(struct __sk_buff *skb, const struct flow *e, const struct flow *q,
					  __u8 dir)
{
	const struct nc_addr *self = dir == POL_EGRESS ? &e->saddr : &e->daddr;
	const struct nc_addr *end = dir == POL_EGRESS ? &q->daddr : &q->saddr;
	struct pol_endpoint *ep = bpf_map_lookup_elem(&pol_endpoints, self);
	struct pol_scratch *s;
	struct ct_entry *c;
	__u32 zero = 0;

	if (!ep)
		return 1; /* no policy selects the pod */
	s = bpf_map_lookup_elem(&pol_scratch, &zero);
	if (!s)
		return 0;
	s->memo_valid = 0; /* the memo is an egress check's, of the same packet */
	if (!(ep->flags & (dir == POL_EGRESS ? POL_ISOLATED_EGRESS : POL_ISOLATED_INGRESS)))
		return 1;
	if (addr_equal(self, end)) {
		pol_conn_key(&s->key, q);
		c = bpf_map_lookup_elem(&ct_flows, &s->key);
		if (c && c->pol_rev == pol_rev_now() && (c->pol_verdict & (CT_POL_EGRESS | CT_POL_INGRESS)) &&
		    !ct_expired(c, q->proto, nc_now())) {
			mon_crossed(MON_CUBE_POLICY);
			return 1;
		}
	}
	return pol_check(skb, e, dir);
}
