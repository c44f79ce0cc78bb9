/* monitor.h: the monitor cube's logic (maps: monitor_maps.h). A drop site
 * reads `return mon_drop(skb, f, MON_DROP_...)`: the drop is counted by
 * reason, and reported when the agent asked for drops. Nothing here runs
 * for a packet that goes on, unless the agent asked for trace or policy
 * events, and then only on a flow's first packet. Events are written in
 * place in the ring buffer (bpf_ringbuf_reserve), never on the stack: the
 * programs' 512 bytes of stack are the cubes'. */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "monitor_maps.h"

static always_inline __u32 mon_wanted(enum mon_flags flag)
{
	__u32 zero = 0;
	struct mon_config *c = bpf_map_lookup_elem(&monitor_config, &zero);

	return c ? c->flags & flag : 0;
}

static always_inline void mon_count(void *map, __u32 key)
{
	__u64 *n = bpf_map_lookup_elem(map, &key);

	if (n)
		*n += 1; /* per CPU: no other writer */
}

/* mon_crossed marks the packet being processed as crossing cube c (counted
 * once, at the end of the entry program: mon_cubes_end). */
static always_inline void mon_crossed(enum mon_cube c)
{
	__u32 zero = 0;
	struct mon_cubes *m = bpf_map_lookup_elem(&monitor_cubes, &zero);

	if (m)
		m->seen |= 1u << c;
}

/* mon_routed marks the packet being processed as sent on by the router
 * (how, to which device; via: the tunnel's remote end, or NULL), for the
 * cube counters and, while tracing, a flow's first packet's event. */
static always_inline void mon_routed(enum mon_route how, __u32 ifindex, const struct nc_addr *via)
{
	__u32 zero = 0;
	struct mon_cubes *m = bpf_map_lookup_elem(&monitor_cubes, &zero);

	if (!m)
		return;
	m->seen |= 1u << MON_CUBE_ROUTER;
	m->route = how;
	m->route_ifindex = ifindex;
	if (via)
		m->route_via = *via;
}

/* mon_new_flow marks the packet being processed as a flow's first, as
 * conntrack started it (a TCP flow's first packet is its SYN). */
static always_inline void mon_new_flow(void)
{
	__u32 zero = 0;
	struct mon_cubes *m = bpf_map_lookup_elem(&monitor_cubes, &zero);

	if (m)
		m->new_flow = 1;
}

/* An entry program counts its packet per cube in two steps:
 *	__u32 len = mon_cubes_begin(skb, MON_AT_...);
 *	return mon_cubes_end(skb, handle(skb), len);
 * mon_cubes_begin: a packet enters; no cube crossed yet. Returns its
 * length as it arrived. */
static always_inline void mon_cubes_reset(__u32 len, __u8 point)
{
	__u32 zero = 0;
	struct mon_cubes *m = bpf_map_lookup_elem(&monitor_cubes, &zero);

	if (m) {
		m->seen = 0;
		m->len = len;
		m->route = MON_RT_NONE;
		m->new_flow = 0;
		m->point = point;
	}
}

static always_inline __u32 mon_cubes_begin(struct __sk_buff *skb, __u8 point)
{
	mon_cubes_reset(skb->len, point);
	return skb->len;
}

/* mon_cubes_count counts the packet (len bytes) once for each cube it
 * crossed (m->seen). */
static always_inline void mon_cubes_count(struct mon_cubes *m, __u32 len)
{
	__u32 seen = m->seen;

#pragma unroll
	for (int i = 0; i < MON_CUBE_MAX; i++) {
		if (seen & (1u << i)) {
			m->cube[i].packets += 1;
			m->cube[i].bytes += len;
		}
	}
}

/* mon_packet_len is the length of the packet being processed, as it
 * arrived at its entry program. */
static always_inline __u32 mon_packet_len(void)
{
	__u32 zero = 0;
	struct mon_cubes *m = bpf_map_lookup_elem(&monitor_cubes, &zero);

	return m ? m->len : 0;
}

static always_inline void mon_trace_route(struct __sk_buff *skb, struct mon_cubes *m);

/* mon_cubes_end counts the packet (len bytes) once for each cube it
 * crossed (MON_F_CUBES), reports how the router sent a flow's first
 * packet on (MON_F_TRACE), and returns the program's verdict. */
static always_inline int mon_cubes_end(struct __sk_buff *skb, int verdict, __u32 len)
{
	__u32 zero = 0;
	struct mon_config *c = bpf_map_lookup_elem(&monitor_config, &zero);
	__u32 flags = c ? c->flags : 0;
	struct mon_cubes *m;

	if (!(flags & (MON_F_CUBES | MON_F_TRACE)))
		return verdict;
	m = bpf_map_lookup_elem(&monitor_cubes, &zero);
	if (!m)
		return verdict;
	if (flags & MON_F_CUBES)
		mon_cubes_count(m, len);
	if ((flags & MON_F_TRACE) && m->route != MON_RT_NONE && verdict != TC_ACT_SHOT)
		mon_trace_route(skb, m);
	return verdict;
}

/* What an event says beyond the packet's flow. */
struct mon_detail {
	enum mon_type type;
	enum mon_trace trace;
	enum mon_drop drop;
	const struct nc_addr *xaddr;
	__be16 xport;
	__u32 svc;
	__u8 pol_dir;
	enum mon_pol_match match;
	__u32 endpoint;
	__u32 peer;
	__u64 netns;
	enum mon_route route;
	__u32 out_ifindex;
	/* Where and how long, for an event of a program without an skb
	 * (XDP); from the skb otherwise. */
	__u32 ifindex;
	__u32 len;
};

/* mon_wakeup is the submit flag of a record of size bytes just reserved
 * on monitor_events. The agent polls the ring buffer (pkg/cubes/monitor):
 * a record wakes it only when the data waiting crosses MON_WAKEUP_BYTES,
 * so a busy node's events do not cost a wake-up each, and a reader that
 * fell behind (the data waiting stays above the mark) does not make every
 * record pay one (a wake-up is an irq_work, a self-interrupt: +0.7 us a
 * record here, TestVerdictEventCost). A reader never sleeps with data
 * waiting (the ring buffer's poll says so), so only a sleeping reader
 * needs the crossing; one missed between two CPUs' records waits for the
 * poll. */
static always_inline __u64 mon_wakeup(__u64 size)
{
	__u64 waiting = bpf_ringbuf_query(&monitor_events, BPF_RB_AVAIL_DATA);
	__u64 rec = (size + BPF_RINGBUF_HDR_SZ + 7) & ~7ULL; /* with its header, 8-byte aligned */

	return waiting >= MON_WAKEUP_BYTES && waiting - rec < MON_WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
}

/* mon_report writes an event about f (NULL: none read), seen by skb's
 * program (NULL: a socket hook or XDP, d says where), with d; a full ring buffer is counted. */
static always_inline void mon_report(struct __sk_buff *skb, const struct flow *f, __u8 point,
				     const struct mon_detail *d)
{
	struct mon_event *ev = bpf_ringbuf_reserve(&monitor_events, sizeof(*ev), 0);

	if (!ev) {
		mon_count(&monitor_stats, MON_STAT_LOST);
		return;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->ts_ns = bpf_ktime_get_ns();
	ev->type = d->type;
	ev->point = point;
	ev->trace = d->trace;
	ev->drop = d->drop;
	ev->match = d->match;
	ev->pol_dir = d->pol_dir;
	ev->svc = d->svc;
	ev->endpoint = d->endpoint;
	ev->peer = d->peer;
	ev->netns = d->netns;
	ev->route = d->route;
	ev->out_ifindex = d->out_ifindex;
	if (d->xaddr) {
		ev->xaddr = *d->xaddr;
		ev->xport = d->xport;
	}
	if (skb) {
		ev->ifindex = skb->ifindex;
		ev->len = skb->len;
	} else {
		ev->ifindex = d->ifindex;
		ev->len = d->len;
	}
	if (f) {
		ev->saddr = f->saddr;
		ev->daddr = f->daddr;
		ev->sport = f->sport;
		ev->dport = f->dport;
		ev->proto = f->proto;
		ev->family = f->family;
		ev->tcp_flags = f->tcp_flags;
	}
	bpf_ringbuf_submit(ev, mon_wakeup(sizeof(*ev)));
	mon_count(&monitor_stats, MON_STAT_SENT);
}

/* mon_note_drop_detail counts packet f of skb as dropped (d->drop) and
 * reports it (MON_F_DROPS). */
static always_inline void mon_note_drop_detail(struct __sk_buff *skb, const struct flow *f,
					       const struct mon_detail *d)
{
	mon_count(&monitor_drops, d->drop);
	if (mon_wanted(MON_F_DROPS))
		mon_report(skb, f, f->point, d);
}

static always_inline void mon_note_drop(struct __sk_buff *skb, const struct flow *f, enum mon_drop reason)
{
	struct mon_detail d = {.type = MON_EV_DROP, .drop = reason};

	mon_note_drop_detail(skb, f, &d);
}

/* mon_drop: a drop site's return value (TC_ACT_SHOT), counted and
 * reported. */
static always_inline int mon_drop(struct __sk_buff *skb, const struct flow *f, enum mon_drop reason)
{
	mon_note_drop(skb, f, reason);
	return TC_ACT_SHOT;
}

/* mon_drop_packet: mon_drop for a packet no flow was read from (a header
 * too short for the cube that needed it). */
static always_inline int mon_drop_packet(struct __sk_buff *skb, __u8 point, enum mon_drop reason)
{
	struct mon_detail d = {.type = MON_EV_DROP, .drop = reason};

	mon_count(&monitor_drops, reason);
	if (mon_wanted(MON_F_DROPS))
		mon_report(skb, NULL, point, &d);
	return TC_ACT_SHOT;
}

/* mon_trace_xlate reports a flow's first packet translated by a cube
 * (MON_F_TRACE): what (MON_TR_LB, _SNAT, _MASQ, _SOCK_LB), to where (the
 * backend, or the new source), for which Service (svc: its revNAT id, or
 * 0). */
static always_inline void mon_trace_xlate(struct __sk_buff *skb, const struct flow *f, enum mon_trace what,
					  const struct nc_addr *xaddr, __be16 xport, __u32 svc)
{
	struct mon_detail d = {.type = MON_EV_TRACE, .trace = what, .xaddr = xaddr, .xport = xport, .svc = svc};

	if (mon_wanted(MON_F_TRACE))
		mon_report(skb, f, f->point, &d);
}

/* mon_flow_end reports a flow's end (MON_TR_FLOW_END, _TIMEOUT) with its
 * two ways' counters; the flow is saddr:sport -> daddr:dport. */
static always_inline void mon_flow_end(enum mon_trace what, const struct nc_addr *saddr, const struct nc_addr *daddr,
				       __be16 sport, __be16 dport, __u8 proto, const __u64 packets[2], const __u64 bytes[2])
{
	struct mon_flow_end *r = bpf_ringbuf_reserve(&monitor_events, sizeof(*r), 0);

	if (!r) {
		mon_count(&monitor_stats, MON_STAT_LOST);
		return;
	}
	__builtin_memset(r, 0, sizeof(*r));
	r->ev.ts_ns = bpf_ktime_get_ns();
	r->ev.type = MON_EV_TRACE;
	r->ev.trace = what;
	r->ev.saddr = *saddr;
	r->ev.daddr = *daddr;
	r->ev.sport = sport;
	r->ev.dport = dport;
	r->ev.proto = proto;
	r->ev.family = addr_is_v4(daddr) ? 4 : 6;
	r->packets[0] = packets[0];
	r->packets[1] = packets[1];
	r->bytes[0] = bytes[0];
	r->bytes[1] = bytes[1];
	bpf_ringbuf_submit(r, mon_wakeup(sizeof(*r)));
	mon_count(&monitor_stats, MON_STAT_SENT);
}

/* mon_trace_route reports how the router sent on the packet of skb (as it
 * left: translated) when it is a flow's first: a TCP SYN, or a packet
 * conntrack started a flow with. The packet is read into m->flow (off the
 * stack: the programs' end is where their stack is fullest). */
static always_inline void mon_trace_route(struct __sk_buff *skb, struct mon_cubes *m)
{
	struct mon_detail d = {.type = MON_EV_TRACE, .trace = MON_TR_ROUTE};
	struct flow *f = &m->flow;
	__u32 l4;
	__u8 b;

	__builtin_memset(f, 0, sizeof(*f));
	if (parse_addrs(skb, f))
		return;
	if (f->family == 4) {
		if (bpf_skb_load_bytes(skb, L3_OFF, &b, 1))
			return;
		l4 = L3_OFF + (b & 0xf) * 4;
	} else {
		l4 = L3_OFF + sizeof(struct ipv6hdr);
	}
	if (f->proto == IPPROTO_TCP || f->proto == IPPROTO_UDP) {
		if (bpf_skb_load_bytes(skb, l4, &f->sport, 2) || bpf_skb_load_bytes(skb, l4 + 2, &f->dport, 2))
			return;
	}
	if (f->proto == IPPROTO_TCP) {
		if (bpf_skb_load_bytes(skb, l4 + 13, &f->tcp_flags, 1))
			return;
		if ((f->tcp_flags & (TCP_FLAG_SYN | TCP_FLAG_ACK)) != TCP_FLAG_SYN)
			return;
	} else if (!m->new_flow) {
		return;
	}
	d.route = m->route;
	d.out_ifindex = m->route_ifindex;
	if (m->route == MON_RT_TUNNEL)
		d.xaddr = &m->route_via;
	mon_report(skb, f, m->point, &d);
}
