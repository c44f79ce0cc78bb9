/* lb_maps.h: the load-balancer cube's maps and their layouts (logic:
 * lb.h). The Go side, pkg/cubes/lb, writes all but lb_affinity.
 */
#pragma once
#include "lib/common.h"

#ifndef LB_SERVICES_MAX
#define LB_SERVICES_MAX 65536 /* the agent resizes every map before load */
#endif

/* Options of a frontend, in its master entry. */
/* How a flow from outside reaches a backend on another node (the agent's
 * --nodeport-mode, set at load): SNAT to this node (its replies come back
 * through it), DSR (direct server return: the frontend travels with the
 * packet, cubes/lb/dsr.h, and the backend's node answers the client
 * itself), or hybrid (DSR for TCP, SNAT for UDP, whose datagrams may not
 * have room for the frontend). */
enum lb_nodeport_mode : __u32 {
	LB_NODEPORT_SNAT = 0,
	LB_NODEPORT_DSR = 1,
	LB_NODEPORT_HYBRID = 2,
};

volatile const enum lb_nodeport_mode lb_nodeport = LB_NODEPORT_SNAT;

enum lb_svc_flags : __u16 {
	/* Reached from outside the cluster through this node (NodePort,
	 * ExternalIP, LoadBalancer IP): handled by the node program. */
	LB_SVC_EXTERNAL = 1,
	/* externalTrafficPolicy Local (with LB_SVC_EXTERNAL) or
	 * internalTrafficPolicy Local: only this node's endpoints are in the
	 * slots, the client's address is kept, and with no local endpoint
	 * the packet is dropped (not refused, as kube-proxy does). */
	LB_SVC_LOCAL = 2,
	/* Backends chosen by Maglev consistent hashing of the flow (the same
	 * choice on every node, and few flows move when backends change)
	 * instead of at random. */
	LB_SVC_MAGLEV = 4,
	/* loadBalancerSourceRanges: only clients in lb_source_ranges for this
	 * frontend's revNAT id may connect; others are dropped. */
	LB_SVC_SOURCE_RANGES = 8,
	/* A LoadBalancer IP this node answers ARP/NDP for (lb_announce);
	 * kept here so that a restarted agent knows which frontends hold
	 * an announcement. The packet path does not read it. */
	LB_SVC_ANNOUNCE = 16,
	/* externalTrafficPolicy Local, on the frontend as seen from outside:
	 * an in-cluster twin (scope LB_SCOPE_INT, flag LB_SVC_SCOPE_INT)
	 * serves clients inside the cluster (pods, the node) with every
	 * endpoint, as kube-proxy does (its "short-circuit"): Local is about
	 * keeping an outside client's address, which an inside one keeps
	 * anyway. */
	LB_SVC_TWO_SCOPES = 32,
	LB_SVC_SCOPE_INT = 64,
};

/* Which view of a frontend a key holds (lb_svc_key.scope). */
enum lb_scope : __u8 {
	LB_SCOPE_EXT = 0, /* every frontend: as the node serves it */
	LB_SCOPE_INT = 1, /* the in-cluster twin of a LB_SVC_TWO_SCOPES frontend */
};

struct lb_svc_key {
	struct nc_addr addr; /* frontend (ClusterIP) */
	__be16 port;
	__u8 proto;          /* IPPROTO_TCP, IPPROTO_UDP or IPPROTO_SCTP */
	enum lb_scope scope;
	__u16 slot;          /* 0 = master entry, 1..count = backend slots */
	__u16 pad2;
};

struct lb_svc_val {
	__u32 backend_id;    /* slot entries; master entry: ClientIP affinity
			      * timeout in seconds, 0 = none */
	__u32 rev_nat_id;    /* master entry */
	__u16 count;         /* master entry: number of backend slots */
	enum lb_svc_flags flags; /* master entry */
};

/* lb_source_ranges: {revNAT id, client prefix} -> allowed. The LPM key's
 * prefix covers the 32-bit revNAT id, then the address (IPv4 as
 * ::ffff:a.b.c.d, so an IPv4 /n is a prefix of 32 + 96 + n bits). */
struct lb_source_range_key {
	__u32 prefixlen;
	__u32 rev_nat_id;
	struct nc_addr addr;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lb_source_range_key);
	__type(value, __u8);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_source_ranges SEC(".maps");

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

/* lb_retired: backends that no frontend offers any more but whose
 * connections may still run. A TCP or SCTP endpoint removed from a Service
 * keeps its established connections, as kube-proxy's conntrack keeps them:
 * its lb_backends entry stays (no slot names it, so no new flow picks it)
 * while conntrack holds a flow on it. Backend id -> the number of the last
 * conntrack sweep (ct_gc.c) that found a live flow on the backend; key 0,
 * which no backend has, counts the sweeps. The agent deletes a retired
 * backend once two whole sweeps have found no flow on it
 * (pkg/cubes/lb/retired.go). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, LB_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_retired SEC(".maps");

/* lb_vips: the ClusterIPs, addresses that are a Service's alone (a
 * NodePort's address is the node's, an ExternalIP may be too): address ->
 * 1. Read only for the packets whose ports cannot be read (unparsed.h),
 * which no frontend can match but which must not pass for a stray
 * packet to an address the kernel has no route for. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct nc_addr);
	__type(value, __u8);
	__uint(max_entries, LB_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_vips SEC(".maps");

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

/* Maglev: per frontend (by revNAT id), a lookup table of MAGLEV_M backend
 * ids that the agent computes (pkg/cubes/lb/maglev.go) and swaps in whole, as a
 * new inner map, whenever the backends change. */
#ifndef MAGLEV_M
#define MAGLEV_M 16381 /* a prime; >= 100 entries per backend up to 163 backends */
#endif

struct maglev_table {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAGLEV_M);
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__type(key, __u32); /* revNAT id */
	__uint(max_entries, 65536);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct maglev_table);
} lb_maglev SEC(".maps");

/* lb_announce: the LoadBalancer IPs this node answers ARP and IPv6
 * neighbour solicitations for, per uplink (announce.h): {uplink ifindex,
 * address} -> the uplink's MAC, which the answer carries. The agent lists
 * an address on every uplink while this node serves it (any node for
 * externalTrafficPolicy Cluster, a node with a ready endpoint for Local). */
struct lb_announce_key {
	__u32 ifindex;
	struct nc_addr addr;
};

struct lb_announce_val {
	__u8 mac[6];
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct lb_announce_key);
	__type(value, struct lb_announce_val);
	__uint(max_entries, LB_SERVICES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_announce SEC(".maps");

/* lb_uplinks: the node's uplinks, by ifindex -> the uplink's MAC, from the
 * list lb_announce is written from (the lb cube writes both at its start).
 * xdp_from_net serves a unicast frame only when it is addressed to the
 * uplink it came in on (xdp_node.c), as from_net does by the kernel's
 * pkt_type, which XDP has not. A map, not a volatile const: the one
 * program is attached to every uplink, each with its own MAC; and no
 * helper gives an XDP program its device's MAC (a FIB lookup gives the
 * MAC of a route's device, for a route out of this one only, at the price
 * of a lookup per frame). An uplink missing here has its unicast frames
 * passed to from_net, which serves those addressed to it: slower, not
 * wrong. One whose MAC changed since the agent started keeps the old one
 * here until the agent starts again, as lb_announce's answers do. */
struct lb_uplink {
	__u8 mac[6];
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct lb_uplink);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} lb_uplinks SEC(".maps");
