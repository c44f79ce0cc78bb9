/* lb.h: the load-balancer cube. Owns the Service maps and backend selection.
 *
 * Layout (after Cilium's lb4_services_v2 / lb4_backends / lb4_reverse_nat):
 *   lb_services  {frontend, slot 0}      -> master: backend count, revNAT id
 *                {frontend, slot 1..N}   -> backend id
 *   lb_backends  backend id              -> backend address and port
 *   lb_revnat    revNAT id               -> frontend address and port
 * The agent writes backends, then slots, then the master entry, and shrinks
 * in the reverse order, so a reader never follows a slot beyond `count` or
 * a slot to a missing backend.
 */
#pragma once
#include "common.h"

#ifndef LB_SERVICES_MAX
#define LB_SERVICES_MAX 65536 /* the agent resizes every map before load */
#endif

struct lb_svc_key {
	struct nc_addr addr; /* frontend (ClusterIP) */
	__be16 port;
	__u8 proto;          /* IPPROTO_TCP or IPPROTO_UDP */
	__u8 pad;
	__u16 slot;          /* 0 = master entry, 1..count = backend slots */
	__u16 pad2;
};

struct lb_svc_val {
	__u32 backend_id;    /* slot entries; master entry: ClientIP affinity
			      * timeout in seconds, 0 = none */
	__u32 rev_nat_id;    /* master entry */
	__u16 count;         /* master entry: number of backend slots */
	__u16 flags;         /* master entry: enum lb_svc_flags */
};

/* Options of a frontend, in its master entry. */
enum lb_svc_flags {
	/* Reached from outside the cluster through this node (NodePort,
	 * ExternalIP, LoadBalancer IP): handled by the node program. */
	LB_SVC_EXTERNAL = 1,
	/* externalTrafficPolicy Local (with LB_SVC_EXTERNAL) or
	 * internalTrafficPolicy Local: only this node's endpoints are in the
	 * slots, the client's address is kept, and with no local endpoint
	 * the packet is dropped (not refused, as kube-proxy does). */
	LB_SVC_LOCAL = 2,
};

struct lb_backend {
	struct nc_addr addr;
	__be16 port;
	__u8 proto;
	__u8 flags;          /* endpoint state (ready/terminating); none yet, 0 */
};

struct lb_frontend {
	struct nc_addr addr; /* frontend the client believes it talks to */
	__be16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct lb_svc_key);
	__type(value, struct lb_svc_val);
	__uint(max_entries, LB_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct lb_backend);
	__uint(max_entries, LB_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct lb_frontend);
	__uint(max_entries, LB_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_revnat SEC(".maps");

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

	return bpf_map_lookup_elem(&lb_services, &key);
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
	key.slot = (bpf_get_prandom_u32() % svc->count) + 1;
	slot = bpf_map_lookup_elem(&lb_services, &key);
	return slot ? slot->backend_id : 0;
}

/* Session affinity (sessionAffinity: ClientIP). The datapath remembers,
 * per client and Service, the backend it last chose and when; the agent
 * lists which backends are still the Service's (lb_affinity_match), so a
 * client never sticks to a backend that left. */
#ifndef AFFINITY_MAX
#define AFFINITY_MAX 65536
#endif

struct lb_affinity_key {
	struct nc_addr client; /* an address, or a pod's netns cookie (socket-LB) */
	__u32 rev_nat_id;
	__u32 pad;
};

struct lb_affinity_val {
	__u64 last_ns;
	__u32 backend_id;
	__u32 pad;
};

struct lb_affinity_match_key {
	__u32 backend_id;
	__u32 rev_nat_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct lb_affinity_key);
	__type(value, struct lb_affinity_val);
	__uint(max_entries, AFFINITY_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_affinity SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct lb_affinity_match_key);
	__type(value, __u8);
	__uint(max_entries, LB_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_affinity_match SEC(".maps");

/* lb_pick chooses a new flow's backend: the client's recent one if the
 * Service has affinity and the backend is still among its own, else a
 * random slot (remembered when the Service has affinity). */
static always_inline __u32 lb_pick(const struct nc_addr *client, const struct nc_addr *addr,
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

		now = bpf_ktime_get_ns();
		if (a && now - a->last_ns <= timeout_ns) {
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
	id = lb_select_backend(addr, port, proto, svc);
	if (timeout_ns && id) {
		struct lb_affinity_val v = { .last_ns = now, .backend_id = id };

		bpf_map_update_elem(&lb_affinity, &ak, &v, BPF_ANY);
	}
	return id;
}

static always_inline struct lb_frontend *lb_lookup_revnat(__u32 rev_nat_id)
{
	return bpf_map_lookup_elem(&lb_revnat, &rev_nat_id);
}
