/* ct_gc.c: conntrack's garbage collector, an iterator over ct_flows that
 * the agent runs every --conntrack-gc-interval: it removes each entry
 * whose flow has timed out (ct_expired, the rule the datapath itself
 * follows), and writes one record at the end: entries seen and removed.
 * An entry is never removed while its flow is live: the datapath refreshes
 * a flow's time on its packets, and a timed-out flow is already one the
 * datapath no longer follows (its next packet starts it anew).
 */
#include "lib/common.h"
#include "lib/parse.h"
#include "cubes/ct/ct.h"

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_map_elem {
	struct bpf_iter_meta *meta;
	struct bpf_map *map;
	void *key;
	void *value;
} __attribute__((preserve_access_index));

/* One sweep's totals (only the agent runs the iterator, one at a time). */
struct ct_gc_result gc_sweep;

SEC("iter/bpf_map_elem")
int ct_gc(struct bpf_iter__bpf_map_elem *ctx)
{
	struct ct_key *k = ctx->key;
	struct ct_entry *e = ctx->value;

	if (!k || !e) { /* the end: report, and start afresh */
		bpf_seq_write(ctx->meta->seq, &gc_sweep, sizeof(gc_sweep));
		gc_sweep.seen = 0;
		gc_sweep.removed = 0;
		return 0;
	}
	gc_sweep.seen++;
	if (ct_expired(e, k->proto, nc_now())) {
		struct ct_key copy = *k;

		if (!bpf_map_delete_elem(&ct_flows, &copy))
			gc_sweep.removed++;
	}
	return 0;
}
