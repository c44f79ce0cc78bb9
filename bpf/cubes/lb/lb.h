/* lb.h: the load-balancer cube's logic: backend selection (random, Maglev,
 * session affinity) over its maps (lb_maps.h).
 *
 * Layout (after Cilium's lb4_services_v2 / lb4_backends / lb4_reverse_nat):
 *   lb_services  {frontend, slot 0}      -> master: backend count, revNAT id
 *                {frontend, slot 1..N}   -> backend id
 *   lb_backends  backend id              -> backend address and port
 *   lb_revnat    revNAT id               -> frontend address and port
 *   lb_vips      ClusterIP address       -> 1 (for packets without ports)
 * The agent writes backends, then slots, then the master entry, and shrinks
 * in the reverse order, so a reader never follows a slot beyond `count` or
 * a slot to a missing backend.
 */
#pragma once
#include "lib/common.h"
#include "lb_maps.h"
#include "cubes/monitor/monitor.h"

/* lb_source_allowed says whether client may reach the frontend. */
static always_inline int lb_source_allowed(const struct lb_svc_val *svc, const struct nc_addr *client)
{
	struct lb_source_range_key k = {
		.prefixlen = 32 + 128,
		.rev_nat_id = svc->rev_nat_id,
		.addr = *client,
	};

	if (!(svc->flags & LB_SVC_SOURCE_RANGES))
		return 1;
	return bpf_map_lookup_elem(&lb_source_ranges, &k) != NULL;
}

/* lb_is_vip says whether a is a ClusterIP (lb_vips). */
static always_inline int lb_is_vip(const struct nc_addr *a)
{
	if (!bpf_map_lookup_elem(&lb_vips, a))
		return 0;
	mon_crossed(MON_CUBE_LB);
	return 1;
}

/* lb_retired_sweep starts a conntrack sweep (ct_gc.c): its number, which
 * lb_retired_seen stamps on the retired backends that live flows still
 * use; 0 before the agent has written the counter (key 0 of lb_retired).
 * Only the sweep writes the counter, and sweeps run one at a time. */
static always_inline __u32 lb_retired_sweep(void)
{
	__u32 zero = 0;
	__u32 *sweeps = bpf_map_lookup_elem(&lb_retired, &zero);

	if (!sweeps)
		return 0;
	*sweeps += 1;
	return *sweeps;
}

/* lb_retired_seen notes that sweep found a live flow on backend_id: if the
 * backend is retired, it stays (lb_maps.h, lb_retired). */
static always_inline void lb_retired_seen(__u32 backend_id, __u32 sweep)
{
	__u32 *seen = bpf_map_lookup_elem(&lb_retired, &backend_id);

	if (seen)
		*seen = sweep;
}

/* lb_lookup_service returns the master entry of a frontend, or NULL when the
 * address and port are not a Service. */
static always_inline struct lb_svc_val *
lb_lookup_service(const struct nc_addr *addr, __be16 port, __u8 proto)
{
	struct lb_svc_key key = {
		.addr = *addr,
		.port = port,
		.proto = proto,
	};
	struct lb_svc_val *svc = bpf_map_lookup_elem(&lb_services, &key);

	if (svc)
		mon_crossed(MON_CUBE_LB);
	return svc;
}

/* lb_lookup_service_inside is lb_lookup_service for a client inside the
 * cluster (a pod, or the node through socket-LB): a frontend with an
 * in-cluster twin (LB_SVC_TWO_SCOPES) is served by the twin, which has
 * every endpoint. One more lookup, for those frontends only. */
static always_inline struct lb_svc_val *
lb_lookup_service_inside(const struct nc_addr *addr, __be16 port, __u8 proto)
{
	struct lb_svc_val *svc = lb_lookup_service(addr, port, proto);
	struct lb_svc_key key = {
		.addr = *addr,
		.port = port,
		.proto = proto,
		.scope = LB_SCOPE_INT,
	};
	struct lb_svc_val *in;

	if (!svc || !(svc->flags & LB_SVC_TWO_SCOPES))
		return svc;
	in = bpf_map_lookup_elem(&lb_services, &key);
	return in ? in : svc; /* the twin not written yet: as from outside */
}

static always_inline struct lb_backend *lb_lookup_backend(__u32 backend_id)
{
	return bpf_map_lookup_elem(&lb_backends, &backend_id);
}

/* lb_select_backend picks a random slot among the Service's ready backends.
 * Returns the backend id, or 0 when the Service has none. */
static always_inline __u32
lb_select_backend(const struct nc_addr *addr, __be16 port, __u8 proto,
		  const struct lb_svc_val *svc)
{
	struct lb_svc_key key = {
		.addr = *addr,
		.port = port,
		.proto = proto,
	};
	struct lb_svc_val *slot;

	if (svc->count == 0)
		return 0;
	if (svc->flags & LB_SVC_SCOPE_INT)
		key.scope = LB_SCOPE_INT;
	key.slot = (nc_random() % svc->count) + 1;
	slot = bpf_map_lookup_elem(&lb_services, &key);
	return slot ? slot->backend_id : 0;
}

static always_inline __u32 fmix32(__u32 h)
{
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

/* lb_hash_flow hashes a flow's addresses, ports and protocol (the same on
 * every node, so every node's Maglev table sends it to the same backend). */
static always_inline __u32 lb_hash_flow(const struct nc_addr *saddr, __be16 sport,
					const struct nc_addr *daddr, __be16 dport, __u8 proto)
{
	__u32 h = 0x9e3779b9 ^ proto;

	for (int i = 0; i < 4; i++)
		h = fmix32(h ^ saddr->w[i]) ^ fmix32(h + daddr->w[i]);
	return fmix32(h ^ ((__u32)sport << 16 | dport));
}

static always_inline __u32 lb_maglev_select(const struct nc_addr *client, __be16 cport,
					    const struct nc_addr *addr, __be16 port, __u8 proto,
					    const struct lb_svc_val *svc)
{
	__u32 rev_nat_id = svc->rev_nat_id, idx, *id;
	void *table;

	if (svc->count == 0)
		return 0;
	table = bpf_map_lookup_elem(&lb_maglev, &rev_nat_id);
	if (!table) /* not written yet */
		return lb_select_backend(addr, port, proto, svc);
	idx = lb_hash_flow(client, cport, addr, port, proto) % MAGLEV_M;
	id = bpf_map_lookup_elem(table, &idx);
	return id ? *id : 0;
}

/* lb_pick chooses a new flow's backend: the client's recent one if the
 * Service has affinity and the backend is still among its own, else by
 * Maglev or a random slot (remembered when the Service has affinity). */
static always_inline __u32 lb_pick(const struct nc_addr *client, __be16 cport, const struct nc_addr *addr,
				   __be16 port, __u8 proto, const struct lb_svc_val *svc)
{
	struct lb_affinity_key ak = {
		.client = *client,
		.rev_nat_id = svc->rev_nat_id,
	};
	__u64 timeout_ns = (__u64)svc->backend_id * 1000000000ULL;
	__u64 now = 0;
	__u32 id;

	if (timeout_ns) {
		struct lb_affinity_val *a = bpf_map_lookup_elem(&lb_affinity, &ak);

		now = nc_now();
		/* A client's entry another CPU refreshed after this one read
		 * the clock (last_ns > now) is live too. */
		if (a && (a->last_ns >= now || now - a->last_ns <= timeout_ns)) {
			struct lb_affinity_match_key mk = {
				.backend_id = a->backend_id,
				.rev_nat_id = svc->rev_nat_id,
			};

			if (bpf_map_lookup_elem(&lb_affinity_match, &mk)) {
				a->last_ns = now;
				return a->backend_id;
			}
		}
	}
	if (svc->flags & LB_SVC_MAGLEV)
		id = lb_maglev_select(client, cport, addr, port, proto, svc);
	else
		id = lb_select_backend(addr, port, proto, svc);
	if (timeout_ns && id) {
		struct lb_affinity_val v = { .last_ns = now, .backend_id = id };

		bpf_map_update_elem(&lb_affinity, &ak, &v, BPF_ANY);
	}
	return id;
}

static always_inline struct lb_frontend *lb_lookup_revnat(__u32 rev_nat_id)
{
	struct lb_frontend *fe = bpf_map_lookup_elem(&lb_revnat, &rev_nat_id);

	if (fe)
		mon_crossed(MON_CUBE_LB); /* a reply translated back to its frontend */
	return fe;
}
