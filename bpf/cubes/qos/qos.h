/* qos.h: the QoS cube's logic (maps: qos_maps.h): network slices in the
 * datapath. What a pod sends is classified by its source address to the
 * pod's slice as it enters from_pod, and leaves:
 *   with its slice's DSCP (IPv4 TOS, IPv6 traffic class; the ECN bits
 *     kept), which the router copies to a VXLAN packet's outer header, so
 *     the underlay can honour the slice past the node;
 *   queued at the uplink by its slice and rate, as the agent set the
 *   uplinks up (enum qos_mode, pkg/cubes/qos):
 *   - EDT: with its slice's skb->priority, the band of the uplink's prio
 *     qdisc (the latency class is served first), and paced to its rate by
 *     Earliest Departure Time (skb->tstamp, a monotonic delivery time that
 *     survives the redirect to the uplink, whose fq qdisc holds the packet
 *     until then), as Cilium's Bandwidth Manager does; a packet that would
 *     wait longer than the bucket's horizon is dropped
 *     (egress-rate-exceeded);
 *   - HTB: with its HTB class as skb->priority, which HTB reads as the
 *     class to queue it in (its rate's, or its slice class's).
 * What a pod with a kubernetes.io/ingress-bandwidth receives is sent
 * through its veth's qdisc, a shaper of that rate the agent installs
 * (HOOK_MARK_VIA_VETH, asked for in the to_pod hook, which every way
 * into a pod passes).
 * With no pod of the node in a slice or with a rate, the hooks cost an
 * array lookup; with some, a pod in none costs a hash lookup more.
 */
#pragma once
#include "lib/common.h"
#include "lib/hook.h"
#include "qos_maps.h"
#include "cubes/monitor/monitor.h"

/* qos_set_dscp makes the packet's DSCP dscp (the ECN bits kept). */
static always_inline void qos_set_dscp(struct __sk_buff *skb, const struct flow *f, __u8 dscp)
{
	__u8 b[2];

	if (bpf_skb_load_bytes(skb, L3_OFF, b, 2))
		return;
	if (f->family == 4) {
		__u8 tos = (dscp << 2) | (b[1] & 3);
		__be16 old = bpf_htons((__u16)b[0] << 8 | b[1]), new = bpf_htons((__u16)b[0] << 8 | tos);

		if (tos == b[1])
			return;
		if (bpf_l3_csum_replace(skb, L3_OFF + offsetof(struct iphdr, check), old, new, 2) == 0)
			bpf_skb_store_bytes(skb, L3_OFF + 1, &tos, 1, 0);
		return;
	}
	/* IPv6: version (4 bits), traffic class (8), flow label (20). */
	__u8 tc = (b[0] << 4) | (b[1] >> 4), ntc = (dscp << 2) | (tc & 3);

	if (ntc == tc)
		return;
	b[0] = (b[0] & 0xf0) | (ntc >> 4);
	b[1] = (__u8)(ntc << 4) | (b[1] & 0x0f);
	bpf_skb_store_bytes(skb, L3_OFF, b, 2, 0);
}

/* qos_next is when a packet of len bytes may go in bucket b (rate set):
 * its share of the rate after the last one scheduled, or, the bucket
 * idle, after burst_ns of the rate ago (what lets a burst go at once). */
static always_inline __u64 qos_next(const struct qos_bucket *b, __u32 len, __u64 now)
{
	__u64 last = b->t_last;
	__u64 base = last + b->burst_ns < now ? now - b->burst_ns : last;

	return base + (__u64)len * 1000000000ULL / b->rate;
}

/* qos_pace schedules the packet's departure in bucket b: 0, or -1 when it
 * would leave beyond the horizon. The bucket is updated without a lock,
 * as the Bandwidth Manager's is: two CPUs pacing one bucket at the same
 * instant may both take one slot (an overshoot of a packet per race). */
static always_inline int qos_pace(struct __sk_buff *skb, struct qos_bucket *b)
{
	__u64 now = bpf_ktime_get_ns(), t_next;

	if (!b->rate)
		return 0;
	t_next = qos_next(b, skb->len, now);
	if (t_next <= now) {
		b->t_last = t_next;
		return 0;
	}
	if (t_next - now > b->horizon_ns)
		return -1;
	b->t_last = t_next;
	bpf_skb_set_tstamp(skb, t_next, BPF_SKB_TSTAMP_DELIVERY_MONO);
	return 0;
}

/* qos_conf_active: the agent's config, when any pod of the node has a
 * slice or a rate (NULL: none has, the hooks have nothing to do). */
static always_inline const struct qos_conf *qos_conf_active(void)
{
	const struct qos_conf *c;
	__u32 k = 0;

	c = bpf_map_lookup_elem(&qos_config, &k);
	return c && c->active ? c : NULL;
}

/* qos_slice_of is pod p's slice (NULL: best effort, in none). */
static always_inline struct qos_slice *qos_slice_of(const struct qos_pod *p)
{
	__u32 k = p->slice;

	return k ? bpf_map_lookup_elem(&qos_slices, &k) : NULL;
}

/* qos_set_class gives the packet pod p's class at the uplink's queueing:
 * its HTB class, or (EDT) its slice's prio band. */
static always_inline void qos_set_class(struct __sk_buff *skb, const struct qos_conf *c,
					const struct qos_pod *p, const struct qos_slice *s)
{
	if (c->mode == QOS_MODE_HTB)
		skb->priority = p->classid;
	else if (s)
		skb->priority = s->priority;
}

/* qos_from_pod: the hook on what a pod sends (pkg/cube/hooks.go). */
static always_inline int qos_from_pod(struct __sk_buff *skb, const struct flow *f)
{
	const struct qos_conf *c = qos_conf_active();
	struct qos_slice *s;
	struct qos_bucket *b;
	struct qos_pod *p;
	__u32 k;

	if (!c)
		return CUBE_PASS;
	p = bpf_map_lookup_elem(&qos_pods, &f->saddr);
	if (!p)
		return CUBE_PASS;
	mon_crossed(MON_CUBE_QOS);
	s = qos_slice_of(p);
	if (s && s->dscp != QOS_DSCP_KEEP)
		qos_set_dscp(skb, f, s->dscp);
	qos_set_class(skb, c, p, s);
	if (c->mode == QOS_MODE_HTB)
		return CUBE_PASS; /* the HTB class enforces the rate */
	k = p->bucket;
	b = k ? bpf_map_lookup_elem(&qos_buckets, &k) : NULL;
	if (b && qos_pace(skb, b))
		return mon_drop(skb, f, MON_DROP_RATE);
	return CUBE_PASS;
}

/* qos_set_queue sends the packet to its transmit queue of the uplink:
 * the latency class's own, or the first (the HTB's). Every packet leaving
 * gets one: without, the kernel would spread them over the queues by
 * their hash, into the latency class's queue too. */
static always_inline void qos_set_queue(struct __sk_buff *skb, const struct qos_conf *c)
{
	skb->queue_mapping = skb->priority == c->latency_classid ? c->latency_queue : 1;
}

/* qos_to_net: the hook on what leaves by an uplink. A pod's packet the
 * kernel forwarded (--routing kernel) had its skb->priority reset from
 * its TOS by ip_forward, which loses the class from_pod gave it: it is
 * given again here, where the uplink's qdisc is next. With HTB, a packet
 * that kept its netcube class (the router's redirect) costs no lookup.
 * The uplink's queue is picked after this hook (tc egress runs first). */
static always_inline int qos_to_net(struct __sk_buff *skb, const struct flow *f)
{
	const struct qos_conf *c = qos_conf_active();
	struct qos_pod *p;

	if (!c)
		return CUBE_PASS;
	if (c->mode != QOS_MODE_HTB || skb->priority >> 16 != c->htb_major) {
		p = bpf_map_lookup_elem(&qos_pods, &f->saddr);
		if (p) {
			mon_crossed(MON_CUBE_QOS);
			qos_set_class(skb, c, p, qos_slice_of(p));
		}
	}
	if (c->latency_queue)
		qos_set_queue(skb, c);
	return CUBE_PASS;
}

/* qos_to_pod: the hook on what a pod of this node is about to receive:
 * a pod with an ingress rate receives through its veth's qdisc, which
 * the agent made a shaper of that rate. */
static always_inline int qos_to_pod(struct __sk_buff *skb, const struct flow *f)
{
	struct qos_pod *p;

	if (!qos_conf_active())
		return CUBE_PASS;
	p = bpf_map_lookup_elem(&qos_pods, &f->daddr);
	if (!p || !p->ingress)
		return CUBE_PASS;
	mon_crossed(MON_CUBE_QOS);
	skb->mark = HOOK_MARK_VIA_VETH;
	return CUBE_PASS;
}
