/* ct_gc.c: conntrack's garbage collector, a program the agent runs
 * (BPF_PROG_RUN) every --conntrack-gc-interval: it walks ct_flows
 * (bpf_for_each_map_elem) and removes each entry whose flow has timed out
 * (ct_expired, the rule the datapath itself follows), then writes the
 * sweep's totals, entries seen and removed, over the start of the packet
 * it was run with. An entry is never removed while its flow is live: the
 * datapath refreshes a flow's time on its packets, and a timed-out flow
 * is already one the datapath no longer follows (its next packet starts
 * it anew).
 * It also tells the load balancer which retired backends (cubes/lb,
 * lb_retired) live flows still run on, so that the agent deletes a
 * backend removed from every Service only once its connections are gone.
 * Why not a map iterator (iter/bpf_map_elem), which would yield the CPU
 * between entries: some kernels refuse to load one (EPERM, even to root);
 * a tc program run on a dummy packet loads wherever the datapath does.
 * A sweep of the default 262,144 entries takes milliseconds.
 */
#include "lib/common.h"
#include "lib/parse.h"
#include "cubes/ct/ct.h"
#include "cubes/lb/lb.h"

struct ct_gc_ctx {
	struct ct_gc_result res;
	__u64 now;
	__u32 traced; /* MON_F_TRACE: a timed-out entry's counters are reported */
	__u32 sweep;  /* this sweep's number (lb_retired_sweep) */
};

/* ct_gc_timeout reports a timed-out entry's counters (its own way's) and
 * forgets them. */
static always_inline void ct_gc_timeout(const struct ct_key *k)
{
	struct ct_scratch *s = ct_scratch_area();
	int way = k->dir == CT_SERVICE ? 0 : 1;

	if (!s || !bpf_map_lookup_elem(&ct_acct, k))
		return;
	s->packets[!way] = s->bytes[!way] = 0;
	ct_take_acct(s, k, way);
	mon_flow_end(MON_TR_FLOW_TIMEOUT, &k->saddr, &k->daddr, k->sport, k->dport, k->proto, s->packets, s->bytes);
}

static long ct_gc_one(void *map, struct ct_key *k, struct ct_entry *e, struct ct_gc_ctx *c)
{
	c->res.seen++;
	if (ct_expired(e, k->proto, c->now)) {
		struct ct_key copy = *k;

		if (!bpf_map_delete_elem(&ct_flows, &copy))
			c->res.removed++;
		if (c->traced)
			ct_gc_timeout(&copy);
	} else if (k->dir == CT_SERVICE && e->backend_id && c->sweep) {
		lb_retired_seen(e->backend_id, c->sweep);
	}
	return 0;
}

/* ct_gc_acct_one removes the counters of an entry no longer in ct_flows
 * (its flow ended while nobody traced). */
static long ct_gc_acct_one(void *map, struct ct_key *k, struct ct_acct *a, void *unused)
{
	struct ct_key copy = *k;

	if (!bpf_map_lookup_elem(&ct_flows, &copy))
		bpf_map_delete_elem(&ct_acct, &copy);
	return 0;
}

SEC("tc")
int ct_gc(struct __sk_buff *skb)
{
	struct ct_gc_ctx c = {.now = nc_now(), .traced = mon_wanted(MON_F_TRACE)};

	c.sweep = lb_retired_sweep();
	bpf_for_each_map_elem(&ct_flows, ct_gc_one, &c, 0);
	bpf_for_each_map_elem(&ct_acct, ct_gc_acct_one, NULL, 0);
	if (bpf_skb_store_bytes(skb, 0, &c.res, sizeof(c.res), 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
