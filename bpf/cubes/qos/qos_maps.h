/* qos_maps.h: the QoS cube's maps and layouts (logic: qos.h). The Go
 * side, pkg/cubes/qos, writes them from the NetworkSlices and the pods'
 * kubernetes.io/egress-bandwidth annotations: which slice each pod of
 * this node is in, what a slice's packets get, and the rates.
 */
#pragma once
#include "lib/common.h"

/* A slice's class (its name in a NetworkSlice's spec.class). */
enum qos_class : __u8 {
	QOS_BEST_EFFORT = 0,
	QOS_LATENCY = 1,    /* URLLC-like: strict priority at the uplink */
	QOS_THROUGHPUT = 2, /* eMBB-like: bulk */
};

/* qos_slice.dscp: leave the packet's own DSCP. */
#define QOS_DSCP_KEEP 0xff

/* How the uplinks queue (the agent picks what the kernel has): */
enum qos_mode : __u32 {
	/* Earliest Departure Time: a prio qdisc (skb->priority a TC_PRIO_*
	 * value: the slice's band) with fq under each band, which holds a
	 * packet until its skb->tstamp (qos_buckets paced here). */
	QOS_MODE_EDT = 0,
	/* HTB: skb->priority is the packet's HTB class (qos_pod.classid):
	 * its slice's, or its rate's, whose rate and ceiling the class
	 * enforces; the latency class's has HTB's first priority. For
	 * kernels without sch_fq or sch_prio. */
	QOS_MODE_HTB = 1,
};

struct qos_conf {
	enum qos_mode mode;
	/* Whether any pod of the node has a slice or a rate: without, the
	 * hook costs an array lookup (inlined), not a hash lookup. */
	__u32 active;
	/* The major number of netcube's HTB classes (its qdisc's handle),
	 * so a packet already in one is known without a lookup. */
	__u32 htb_major;
	/* (HTB) The latency class's own transmit queue on the uplinks, as
	 * the queue_mapping a packet leaves with (its queue + 1: the kernel
	 * picks a forwarded packet's queue from a recorded one), or 0: the
	 * latency class shares the uplink's HTB. In its own queue, which no
	 * other packet enters, a latency packet is never behind bulk, and the
	 * CPU that sends it never dequeues bulk packets from the HTB. */
	__u32 latency_queue;
	__u32 latency_classid; /* the latency class's HTB class (its packets' skb->priority) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct qos_conf);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} qos_config SEC(".maps");

/* qos_pods: a pod's address -> its slice and its rates. */
struct qos_pod {
	__u32 slice;   /* qos_slices index; 0: best effort, no slice */
	__u32 bucket;  /* qos_buckets index; 0: no rate (QOS_MODE_EDT) */
	__u32 classid; /* its HTB class, major:minor (QOS_MODE_HTB) */
	__u32 ingress; /* 1: it receives through its veth's qdisc, a shaper of its ingress-bandwidth */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct nc_addr);
	__type(value, struct qos_pod);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} qos_pods SEC(".maps");

/* qos_slices: what a slice's packets get as they leave their pod. */
struct qos_slice {
	__u32 priority; /* skb->priority: the uplink's prio band (TC_PRIO_*) */
	__u8 dscp;      /* the DSCP they leave with; QOS_DSCP_KEEP: their own */
	enum qos_class class;
	__u16 pad;
};

#define QOS_SLICES_MAX 256

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct qos_slice);
	__uint(max_entries, QOS_SLICES_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} qos_slices SEC(".maps");

/* qos_buckets: a rate, paced by Earliest Departure Time: each packet
 * gets the time it may leave (skb->tstamp), and the fq qdisc on the
 * uplink holds it until then. A slice's rate is one bucket its pods on
 * this node share; a pod's egress-bandwidth annotation, a bucket of its
 * own. */
struct qos_bucket {
	__u64 rate;       /* bytes per second */
	__u64 burst_ns;   /* how far behind now the schedule may fall idle: a burst of rate x burst_ns */
	__u64 horizon_ns; /* how far ahead a packet may be scheduled; beyond, it is dropped */
	__u64 t_last;     /* (datapath) the last departure scheduled, monotonic ns */
};

#define QOS_BUCKETS_MAX 16384

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct qos_bucket);
	__uint(max_entries, QOS_BUCKETS_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} qos_buckets SEC(".maps");
