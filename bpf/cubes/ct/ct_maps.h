/* ct_maps.h: the conntrack cube's map and its layout (logic: ct.h). */
#pragma once
#include "lib/common.h"

#ifndef CT_MAX
#define CT_MAX 65536
#endif

enum ct_dir : __u8 {
	CT_SERVICE = 1,
	CT_REPLY = 2,
	CT_POLICY = 3, /* a connection NetworkPolicy judged (cubes/policy):
			* one entry, keyed either way (lower end first) */
};

struct ct_key {
	struct nc_addr saddr;
	struct nc_addr daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	enum ct_dir dir;
	__u16 pad;
};

enum ct_flags : __u8 {
	CT_F_EXTERNAL = 1, /* from outside the cluster, through this node */
	CT_F_SNAT = 2,     /* source translated to nat_addr:nat_port */
	CT_F_MASQ = 4,     /* a pod's flow to outside the cluster, masqueraded
			    * (with CT_F_SNAT) to this node */
	CT_F_HOST = 8,     /* CT_F_EXTERNAL to this node itself (a host-network
			    * backend): its replies leave from the host stack
			    * through the uplink, where to_net translates them */
	CT_F_DSR = 16,     /* direct server return (cubes/lb/dsr.h): the flow
			    * passes this node one way only. Service entry on
			    * the frontend's node: the client's packets, whose
			    * non-SYN TCP ones say the backend answered; reply
			    * entry on the backend's node (nat_addr, nat_port:
			    * the frontend, which its replies leave from). Its
			    * own FIN closes such a flow (the other is unseen). */
	CT_F_HANDSHAKE = 32, /* written by a datapath that follows TCP's
			      * handshake (CT_ST_ESTABLISHED): a flow
			      * answered but not yet established lives as
			      * long as one unanswered. Entries an earlier
			      * agent wrote lack it: answered is established. */
};

/* What a flow has shown so far (both entries of a flow hold the same
 * bits): its timeout (ct_timeout_ns) and when it has ended. */
enum ct_state : __u64 {
	CT_ST_REPLIED = 1, /* the backend (or server) has answered */
	CT_ST_FIN_FWD = 2, /* TCP: a FIN from the client */
	CT_ST_FIN_REV = 4, /* TCP: a FIN from the backend */
	CT_ST_CLOSING = 8, /* TCP: a RST, or FINs both ways */
	CT_ST_FIN2_REV = 16, /* TCP: of the FINs both ways, the backend's came
			      * second (so the client's ACK is the last packet) */
	CT_ST_ESTABLISHED = 32, /* TCP: answered, then a packet without SYN
				 * (the handshake's last ACK, or what
				 * follows it): a SYN-ACK to a spoofed
				 * source never gets here */
};

/* CT_POLICY: which of its pods' policies allowed the connection, as of
 * the entry's pol_rev (the policy cube's). */
enum ct_pol_verdict : __u8 {
	CT_POL_EGRESS = 1,  /* the source's egress */
	CT_POL_INGRESS = 2, /* the destination's ingress */
	CT_POL_SWAPPED = 4, /* the connection's source is the key's daddr */
};

struct ct_entry {
	__u32 backend_id; /* CT_SERVICE: the backend this flow is pinned to */
	__u32 rev_nat_id;
	__u64 last_ns; /* the flow's last packet, either way (to the second:
			* refreshed at most once per CT_TOUCH_NS) */
	struct nc_addr nat_addr; /* CT_F_SNAT: service: node side; reply: client */
	__be16 nat_port;
	enum ct_flags flags;
	enum ct_pol_verdict pol_verdict; /* CT_POLICY */
	__u32 pol_rev;                   /* CT_POLICY: of pol_verdict */
	enum ct_state state; /* bits, set atomically (a flow's two ways
		      * may run on two CPUs at once; 64 bits: the only atomic
		      * OR of the instruction set we compile for) */
};

/* Timeouts in seconds, after the flow's last packet, set by the agent at
 * load (--conntrack-* flags, named after kube-proxy's). */
volatile const __u32 ct_timeout_syn = 60;          /* TCP not yet answered */
volatile const __u32 ct_timeout_tcp = 86400;       /* TCP established */
volatile const __u32 ct_timeout_close = 10;        /* TCP closing */
volatile const __u32 ct_timeout_udp = 30;          /* UDP not yet answered */
volatile const __u32 ct_timeout_udp_stream = 300;  /* UDP answered */

/* What one sweep of the GC (bpf/entry/ct_gc.c) found. */
struct ct_gc_result {
	__u64 seen;    /* entries */
	__u64 removed; /* of those, timed out and removed */
};

/* Counters of the table's life (per CPU, summed by the agent). */
enum ct_stat : __u32 {
	CT_STAT_CREATED = 0,   /* flows written (a new flow, or one rewritten) */
	CT_STAT_CLOSED,        /* flows the datapath removed at their close */
	CT_STAT_INSERT_FAILED, /* flows that could not be written */
	CT_STAT_EARLY_DROP,    /* flows not yet answered, removed from a full
				* table to make room for a new one (evict.h) */
	CT_STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, enum ct_stat);
	__type(value, __u64);
	__uint(max_entries, CT_STAT_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ct_stats SEC(".maps");

/* ct_flows: a hash map, not an LRU one. The datapath writes a flow's
 * state and time through the pointers its lookups return, and a flow's two
 * ways run on two CPUs; an LRU map hands a removed or replaced entry's
 * memory to the next insert at once, so such a write could land in
 * another, newer flow's entry (a new flow seen as closed and removed under
 * its first data: the connection reset or stalled; with the clock race of
 * ct_expired, the long churn test's failures). A hash map without preallocation frees
 * an entry's memory only once no program can hold it. Its bound is the
 * datapath's own removal at close and the GC; a full table refuses a new
 * flow (ct_stats' insert failures), as netfilter's does, and never takes a
 * live flow's entry. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct ct_key);
	__type(value, struct ct_entry);
	__uint(max_entries, CT_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ct_flows SEC(".maps");

/* Early drop (evict.h): the flows written that were not yet answered, in
 * the order they were written, so that a full table can give up the
 * oldest of them for a new flow, as netfilter's early_drop does. A ring
 * shared by every CPU: each slot holds a flow's one or two keys; a newer
 * flow overwrites the oldest slot; a slot's flow may since have been
 * answered, closed or removed (eviction looks each one up first). */
#ifndef CT_EVICT_SLOTS
#define CT_EVICT_SLOTS 16384 /* a power of two */
#endif

struct ct_evict_slot {
	struct ct_key key;   /* one entry of the flow */
	struct ct_key other; /* its other entry (other.dir 0: it has one) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct ct_evict_slot);
	__uint(max_entries, CT_EVICT_SLOTS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ct_unanswered SEC(".maps");

/* ct_unanswered_ring: where the ring stands. Both count up forever (a
 * slot: the count modulo CT_EVICT_SLOTS). */
struct ct_evict_ring {
	__u64 next;   /* flows written to the ring */
	__u64 oldest; /* the first slot eviction has not looked at (at least
		       * next - CT_EVICT_SLOTS: older slots are overwritten) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct ct_evict_ring);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ct_unanswered_ring SEC(".maps");

/* ct_early_drop: whether a full table evicts (--conntrack-early-drop). */
volatile const __u8 ct_early_drop = 1;

/* ct_acct: per-flow counters while the agent traces (MON_F_TRACE): the
 * packets and bytes of each conntrack entry, keyed as the entry (a flow's
 * two ways apart); reported with the flow's end (closed, or timed out)
 * and removed. A hash without preallocation, as ct_flows (its memory only
 * while tracing); the GC removes what a flow that ended untraced left. */
struct ct_acct {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct ct_key);
	__type(value, struct ct_acct);
	__uint(max_entries, CT_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ct_acct SEC(".maps");

/* ct_scratch (per CPU, one entry): room for what the counters need, off
 * the programs' 512 bytes of stack, which the cubes fill. */
struct ct_scratch {
	struct ct_key key;
	struct ct_acct one;
	__u64 packets[2]; /* a flow's end: its two ways */
	__u64 bytes[2];
	struct ct_entry entry; /* a DSR flow's reply entry (cubes/lb/dsr.h) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct ct_scratch);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ct_scratch SEC(".maps");
