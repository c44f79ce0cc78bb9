/* policy.h: the policy cube. Kubernetes NetworkPolicy for this node's
 * pods, judged on the real endpoints of a packet (after load balancing,
 * before any reverse translation): egress when a pod sends, ingress when
 * a pod receives.
 *
 * A pod no policy selects is not in pol_endpoints: one lookup, and the
 * packet goes on. For a selected pod, a connection's first packet is
 * judged by the rules of the isolated direction (the peer's identity from
 * pol_peers, then at most four longest-prefix lookups in pol_entries:
 * {peer, any peer} x {protocol, any protocol}) and, allowed, recorded in
 * pol_flows; its later packets and its replies pass on that record. A
 * packet of a connection not recorded (one older than the policy) is
 * judged as a first packet: a policy change applies to it. In a direction
 * no policy isolates, only a connection's first packet costs more than
 * the endpoint lookup: it is recorded, for its replies.
 * Traffic from this node itself (kubelet's probes) is always allowed.
 */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "policy_maps.h"
#include "cubes/monitor/monitor.h"

static always_inline void pol_flow_key(struct pol_flow_key *k, const struct flow *f, int reverse, __u32 ep)
{
	k->saddr = reverse ? f->daddr : f->saddr;
	k->daddr = reverse ? f->saddr : f->daddr;
	k->sport = reverse ? f->dport : f->sport;
	k->dport = reverse ? f->sport : f->dport;
	k->proto = f->proto;
	k->pad[0] = k->pad[1] = k->pad[2] = 0;
	k->endpoint = ep;
}

/* pol_known says whether f belongs to a connection endpoint ep recorded,
 * either way. */
static always_inline int pol_known(const struct flow *f, __u32 ep)
{
	struct pol_flow_key k;

	pol_flow_key(&k, f, 0, ep);
	if (bpf_map_lookup_elem(&pol_flows, &k))
		return 1;
	pol_flow_key(&k, f, 1, ep);
	return bpf_map_lookup_elem(&pol_flows, &k) != NULL;
}

static always_inline void pol_record(const struct flow *f, __u32 ep)
{
	struct pol_flow_key k;
	struct pol_flow v = {.created_ns = nc_now()};

	pol_flow_key(&k, f, 0, ep);
	bpf_map_update_elem(&pol_flows, &k, &v, BPF_ANY);
}

static always_inline __u32 pol_identity_of(const struct nc_addr *a)
{
	struct nc_prefix k = {.prefixlen = 128, .addr = *a};
	struct pol_peer *p = bpf_map_lookup_elem(&pol_peers, &k);

	return p ? p->identity : POL_WORLD;
}

static always_inline int pol_entry_allows(__u32 endpoint, __u8 dir, __u32 peer, __u8 proto, __be16 port)
{
	struct pol_entry_key k = {
		.prefixlen = (enum pol_entry_bits)(POL_ENTRY_BITS + 16),
		.endpoint = endpoint,
		.dir = dir,
		.proto = proto,
		.peer = peer,
		.port = port,
	};

	return bpf_map_lookup_elem(&pol_entries, &k) != NULL;
}

/* pol_allows looks the rules up: the peer's identity or any peer, the
 * protocol (any port prefix) or every protocol. Returns the rule that
 * matched first (enum mon_pol_match), or MON_POL_NONE. */
static always_inline __u8 pol_allows(__u32 endpoint, __u8 dir, __u32 peer, __u8 proto, __be16 port)
{
	if (pol_entry_allows(endpoint, dir, peer, proto, port))
		return MON_POL_PEER_PORT;
	if (pol_entry_allows(endpoint, dir, peer, 0, 0))
		return MON_POL_PEER_ALL;
	if (pol_entry_allows(endpoint, dir, POL_ANY_PEER, proto, port))
		return MON_POL_ANY_PORT;
	if (pol_entry_allows(endpoint, dir, POL_ANY_PEER, 0, 0))
		return MON_POL_ANY_ALL;
	return MON_POL_NONE;
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
 * allowed it; MON_POL_NONE: dropped, and counted). */
static always_inline void pol_report(struct __sk_buff *skb, const struct flow *f, __u8 dir, __u32 endpoint,
				     __u32 peer, __u8 match)
{
	struct mon_detail d = {.type = MON_EV_TRACE, .trace = MON_TR_POLICY, .pol_dir = dir,
			       .endpoint = endpoint, .peer = peer, .match = match};

	if (match == MON_POL_NONE) {
		d.type = MON_EV_DROP;
		d.trace = MON_TR_NONE;
		d.drop = dir == POL_EGRESS ? MON_DROP_POLICY_EGRESS : MON_DROP_POLICY_INGRESS;
		mon_note_drop_detail(skb, f, &d);
		return;
	}
	if (mon_wanted(MON_F_POLICY))
		mon_report(skb, f, f->point, &d);
}

/* pol_check judges f, a packet of skb between real endpoints, for the pod
 * on side dir of it (POL_EGRESS: its source; POL_INGRESS: its
 * destination). Returns 1 to let it go on, 0 to drop it (counted and
 * reported). */
static always_inline int pol_check(struct __sk_buff *skb, const struct flow *f, __u8 dir)
{
	const struct nc_addr *self = dir == POL_EGRESS ? &f->saddr : &f->daddr;
	const struct nc_addr *peer = dir == POL_EGRESS ? &f->daddr : &f->saddr;
	struct pol_endpoint *ep = bpf_map_lookup_elem(&pol_endpoints, self);
	__u8 isolated, match;
	__u32 id;

	if (!ep)
		return 1; /* no policy selects the pod */
	mon_crossed(MON_CUBE_POLICY);
	isolated = ep->flags & (dir == POL_EGRESS ? POL_ISOLATED_EGRESS : POL_ISOLATED_INGRESS);
	if (!isolated) {
		/* Only recorded, so that its replies pass whatever the other
		 * direction's rules say: a connection's first packet (UDP's
		 * once). Nothing else to do for the rest. */
		if (flow_is_new(f) && (f->proto == IPPROTO_TCP || !pol_known(f, ep->id)))
			pol_record(f, ep->id);
		return 1;
	}
	/* A TCP SYN is judged by the rules (a retransmitted one again, to the
	 * same answer); anything else first by the records: a recorded
	 * connection, or its reply. */
	if (!(f->proto == IPPROTO_TCP && flow_is_new(f)) && pol_known(f, ep->id))
		return 1;
	id = pol_identity_of(peer);
	match = dir == POL_INGRESS && id == POL_HOST ? MON_POL_HOST : pol_allows(ep->id, dir, id, f->proto, f->dport);
	pol_report(skb, f, dir, ep->id, id, match);
	if (match == MON_POL_NONE) {
		pol_count_drop(ep->id, dir == POL_EGRESS ? POL_DROP_EGRESS : POL_DROP_INGRESS);
		return 0;
	}
	pol_record(f, ep->id);
	return 1;
}
