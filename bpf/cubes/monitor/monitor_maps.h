/* monitor_maps.h: the monitor cube's maps and its event (logic:
 * monitor.h). The monitor cube is how the other cubes explain themselves:
 * every drop is counted by reason (always, per CPU) and, with the agent's
 * consent (monitor_config), reported as an event on a ring buffer, with
 * the packet's flow and the hook that saw it; so are, when asked, the
 * first packet of a flow a cube translated (its backend, its SNAT source)
 * and each connection a policy judged. The agent reads the ring buffer
 * and serves it (netcube monitor, the Hubble API, /metrics). A full ring
 * buffer loses events, never packets: the loss is counted. */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"

/* Why a packet was dropped (or, for MON_DROP_NO_ENDPOINTS, refused with
 * a TCP RST or an ICMP unreachable). Each names the cube that decided;
 * pkg/cubes/monitor names each for people and for Hubble. */
enum mon_drop : __u32 {
	MON_DROP_NONE = 0,
	MON_DROP_NO_ENDPOINTS,      /* lb: a Service without a ready endpoint: refused */
	MON_DROP_NO_LOCAL_ENDPOINT, /* lb: traffic policy Local, no endpoint on this node */
	MON_DROP_SOURCE_RANGE,      /* lb: client outside loadBalancerSourceRanges */
	MON_DROP_POLICY_INGRESS,    /* policy: no rule of the receiving pod allows it */
	MON_DROP_POLICY_EGRESS,     /* policy: no rule of the sending pod allows it */
	MON_DROP_CT_CREATE,         /* ct: the flow's entries could not be written */
	MON_DROP_SNAT_NO_PORT,      /* nat: no source port (ICMP identifier) free */
	MON_DROP_NO_NODE_ADDR,      /* nat: no node address of the family to SNAT to */
	MON_DROP_NAT_REWRITE,       /* nat: the packet (or an ICMP error's quote) could not be rewritten */
	MON_DROP_NO_TUNNEL,         /* router: no node's pod CIDR holds the destination (VXLAN) */
	MON_DROP_MALFORMED,         /* router: a header too short to rewrite or route */
	MON_DROP_EXT_HEADER,        /* lb: an IPv6 extension header hides the ports of a packet to a ClusterIP */
	MON_DROP_FRAG_UNSEEN,       /* lb: a later fragment to a ClusterIP, its first fragment not seen here */
	MON_DROP_RATE,              /* qos: a pod's packet would leave beyond its rate's horizon */
	MON_DROP_INVALID_SOURCE,    /* router: a pod sent from an address that is not its own */
	MON_DROP_DSR_UNTRUSTED,     /* lb: a DSR option from a sender that is no node of the cluster, or with DSR off */
	MON_DROP_MAX,
};

/* What an event is. */
enum mon_type : __u8 {
	MON_EV_DROP = 1,  /* a packet dropped (mon_drop) */
	MON_EV_TRACE = 2, /* a packet a cube let through and acted on (mon_trace) */
};

/* What a trace event reports: a flow's first packet, as a cube acted on it. */
enum mon_trace : __u8 {
	MON_TR_NONE = 0,
	MON_TR_LB,        /* lb (tc): a new flow to a Service got its backend (xaddr:xport) */
	MON_TR_SOCK_LB,   /* lb (socket): a pod's socket connected to a backend instead */
	MON_TR_SNAT,      /* nat: a new flow from outside SNATed to this node (xaddr:xport) */
	MON_TR_MASQ,      /* nat: a pod's new flow to outside masqueraded (xaddr:xport) */
	MON_TR_POLICY,    /* policy: a new connection allowed by a rule (match) */
	MON_TR_FLOW_END,  /* ct: a flow closed (FIN, RST): its counters (mon_flow_end) */
	MON_TR_FLOW_TIMEOUT, /* ct: one way of a flow timed out (the GC): its counters */
	MON_TR_ROUTE,     /* router: a flow's first packet sent on (route, ifindex, xaddr) */
};

/* How the router sent a packet on (MON_TR_ROUTE). */
enum mon_route : __u8 {
	MON_RT_NONE = 0,
	MON_RT_POD,     /* into a pod of this node (ifindex: its host veth) */
	MON_RT_FIB,     /* to the FIB's next hop (ifindex: its device) */
	MON_RT_NEIGH,   /* to the FIB's next hop, its neighbour resolved by the kernel */
	MON_RT_OVERLAY, /* into the overlay device, for another node's pod */
	MON_RT_TUNNEL,  /* the overlay: to the node whose pod CIDR holds it (xaddr) */
};

/* Where the packet was seen: the entry program (or the socket hook). */
enum mon_point : __u8 {
	MON_AT_NONE = 0,
	MON_AT_FROM_POD,     /* a pod's veth, what the pod sends */
	MON_AT_TO_POD,       /* a pod's veth, what the pod receives */
	MON_AT_FROM_NET,     /* the uplink, what arrives */
	MON_AT_TO_NET,       /* the uplink, what leaves */
	MON_AT_FROM_OVERLAY, /* the VXLAN device, what arrives */
	MON_AT_TO_OVERLAY,   /* the VXLAN device, what leaves */
	MON_AT_SOCK,         /* a pod's socket (connect, sendmsg) */
	MON_AT_XDP_FROM_NET, /* the uplink's XDP hook, what arrives (before from_net) */
};

/* Which policy rule decided (MON_TR_POLICY; a policy drop is a connection
 * no rule matched). */
enum mon_pol_match : __u8 {
	MON_POL_NONE = 0,
	MON_POL_PEER_PORT,     /* the peer's identity, on this protocol and port */
	MON_POL_PEER_ALL,      /* the peer's identity, every protocol and port */
	MON_POL_ANY_PORT,      /* any peer, on this protocol and port */
	MON_POL_ANY_ALL,       /* any peer, every protocol and port */
	MON_POL_HOST,          /* from this node (kubelet's probes): always allowed */
	MON_POL_DENY,          /* an entry that denies: a ClusterNetworkPolicy's verdict */
};

/* One event on monitor_events. */
struct mon_event {
	__u64 ts_ns;                /* bpf_ktime_get_ns */
	enum mon_type type;
	enum mon_point point;
	enum mon_trace trace;       /* MON_EV_TRACE */
	enum mon_pol_match match;   /* policy events */
	enum mon_drop drop;         /* MON_EV_DROP */
	__u32 ifindex;              /* the device of the hook (0: socket) */
	__u32 len;                  /* the packet's length */
	struct nc_addr saddr;
	struct nc_addr daddr;
	__be16 sport;               /* ICMP echo: the identifier */
	__be16 dport;
	__u8 proto;
	__u8 family;                /* 4 or 6 */
	__u8 tcp_flags;
	__u8 pol_dir;               /* policy events: POL_INGRESS or POL_EGRESS */
	struct nc_addr xaddr;       /* lb: the backend; nat: the new source */
	__be16 xport;
	enum mon_route route;       /* MON_TR_ROUTE */
	__u8 pad;
	__u32 svc;                  /* lb: the Service (its revNAT id) */
	__u32 endpoint;             /* policy: the pod's endpoint id */
	__u32 peer;                 /* policy: the peer's identity */
	__u32 out_ifindex;          /* MON_TR_ROUTE: the device it was sent to */
	__u32 pad2;
	__u64 netns;                /* socket events: the socket's network namespace
				     * cookie (the socket has no address yet: the
				     * agent names the pod by it) */
};

/* A flow's end, with what it carried while the agent traced (ct_acct):
 * the event (saddr..proto: the flow as its first packet was; a timed-out
 * entry: as that way's packets are), then each way's counters (0: as it
 * was sent, 1: its replies; a timed-out entry has its own way's only). */
struct mon_flow_end {
	struct mon_event ev;
	__u64 packets[2];
	__u64 bytes[2];
};

/* What the agent wants reported (monitor_config[0]): drops are counted
 * whatever it says. */
enum mon_flags : __u32 {
	MON_F_DROPS = 1,  /* an event per dropped packet */
	MON_F_POLICY = 2, /* an event per connection a policy allowed */
	MON_F_TRACE = 4,  /* an event per flow a cube translated (its first packet),
			   * and per flow conntrack ended, with its counters */
	MON_F_CUBES = 8,  /* packets and bytes per cube (monitor_cubes) */
};

struct mon_config {
	enum mon_flags flags;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct mon_config);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} monitor_config SEC(".maps");

/* monitor_drops: packets dropped, by reason (per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, enum mon_drop);
	__type(value, __u64);
	__uint(max_entries, MON_DROP_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} monitor_drops SEC(".maps");

/* monitor_stats: what became of the events (per CPU). */
enum mon_stat : __u32 {
	MON_STAT_SENT = 0, /* written to monitor_events */
	MON_STAT_LOST,     /* not written: the ring buffer was full */
	MON_STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, enum mon_stat);
	__type(value, __u64);
	__uint(max_entries, MON_STAT_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} monitor_stats SEC(".maps");

/* monitor_xdp: what the XDP program on the uplinks (xdp_node.c) did with
 * the packets it saw (per CPU): passed on to tc, forwarded itself
 * (XDP_TX), or dropped. */
enum mon_xdp : __u32 {
	MON_XDP_PASSED = 0,
	MON_XDP_FORWARDED,
	MON_XDP_DROPPED,
	MON_XDP_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, enum mon_xdp);
	__type(value, __u64);
	__uint(max_entries, MON_XDP_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} monitor_xdp SEC(".maps");

/* The cubes a packet can cross, for monitor_cubes. A cube counts a
 * packet once however often it acts on it: lb, a packet to or from a
 * Service frontend; ct, one of a tracked flow (found or created); nat, one
 * rewritten; router, one the router sent on (to a pod, a node, the FIB's
 * next hop, a tunnel); policy, one of a pod a NetworkPolicy selects; qos,
 * one of a pod in a network slice or with a rate. */
enum mon_cube : __u32 {
	MON_CUBE_LB = 0,
	MON_CUBE_CT,
	MON_CUBE_NAT,
	MON_CUBE_ROUTER,
	MON_CUBE_POLICY,
	MON_CUBE_QOS,
	MON_CUBE_MAX,
};

struct mon_cube_count {
	__u64 packets;
	__u64 bytes; /* as the packet arrived at the hook */
};

/* monitor_cubes (per CPU, one entry): what each cube handled, and the
 * cubes the packet being processed has crossed so far (seen, a bit per
 * enum mon_cube; a tc program runs to its end on one CPU, so the entry
 * program clears it first and counts it last: mon_cubes_begin, _end). */
struct mon_cubes {
	__u32 seen;
	__u32 len; /* the packet's length as it arrived (per-flow counters) */
	struct mon_cube_count cube[MON_CUBE_MAX];
	/* How the router sent the packet on (trace events: MON_TR_ROUTE),
	 * and whether conntrack started a flow with it. */
	enum mon_route route;
	__u8 new_flow;
	__u8 point; /* enum mon_point: the entry program */
	__u8 pad;
	__u32 route_ifindex;
	struct nc_addr route_via; /* MON_RT_TUNNEL: the remote node */
	struct flow flow;         /* the routed packet, read for its event */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct mon_cubes);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} monitor_cubes SEC(".maps");

/* The enum's names, kept in the object's BTF for bpf2go (no map is keyed
 * by it). Never read. */
volatile const enum mon_cube mon_cube_layout = MON_CUBE_LB;

/* monitor_events: the events, for the agent (1 MiB: about 8,700). The
 * event that brings the data waiting past MON_WAKEUP_BYTES wakes the
 * agent (mon_wakeup); it reads the rest at least every Poll
 * (pkg/cubes/monitor). */
#define MON_WAKEUP_BYTES (64 * 1024)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} monitor_events SEC(".maps");

/* The event's layout, kept in the object's BTF for bpf2go (a ring
 * buffer's map has no value type to carry it). Never read. */
volatile const struct mon_event mon_event_layout = {.type = MON_EV_DROP};
volatile const struct mon_flow_end mon_flow_end_layout = {.ev = {.type = MON_EV_TRACE}};
