/* evict.h: the conntrack cube's early drop. A table full of flows never
 * established (a SYN flood from spoofed sources holds them for the SYN
 * timeout: the backend's SYN-ACKs go to addresses that never complete the
 * handshake) must not refuse a new flow, nor cost an established one its
 * entries. So every flow is written through ct_insert: when the table is
 * full, it removes the oldest flow not yet established (TCP) or answered
 * (UDP, SCTP), from the ring of ct_maps.h, and writes again; a table full
 * of established flows refuses the new one (CT_STAT_INSERT_FAILED), as
 * before. Netfilter does the same (early_drop of entries not yet
 * ASSURED); an LRU map would evict by age alone, established or not, and
 * ct_maps.h says why ct_flows is no LRU.
 *
 * The ring is shared by every CPU without a lock: two CPUs that write one
 * slot at once (only when CT_EVICT_SLOTS flows were written meanwhile)
 * leave it torn or with one flow's keys; such a slot names no entry, or
 * names one not established, and a flow lost from the ring is left to its
 * timeout and the GC. An established flow is never evicted: each slot's
 * entry is looked up and its state read before it is removed. (Between
 * that read and the removal, another CPU may see the flow's handshake
 * end: that flow is then balanced again on its next packet, as one the
 * GC took.) */
#pragma once
#include "ct_maps.h"

#ifndef E2BIG
#define E2BIG 7
#endif

/* How many of the oldest slots one look of ct_evict_unanswered passes
 * for a flow to evict (as many CT_EVICT_TRY()s as it has). */
#define CT_EVICT_TRIES 8

static always_inline struct ct_evict_ring *ct_ring(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&ct_unanswered_ring, &zero);
}

/* ct_claim_slot takes the ring's oldest slot for a new flow, empty (its
 * key's dir 0, so no eviction reads it before the flow's keys are in), or
 * NULL. */
static always_inline struct ct_evict_slot *ct_claim_slot(void)
{
	struct ct_evict_ring *ring;
	struct ct_evict_slot *slot;
	__u32 i;

	if (!ct_early_drop || !(ring = ct_ring()))
		return NULL;
	i = __sync_fetch_and_add(&ring->next, 1) & (CT_EVICT_SLOTS - 1);
	slot = bpf_map_lookup_elem(&ct_unanswered, &i);
	if (slot)
		slot->key.dir = 0;
	return slot;
}

/* ct_note_unanswered remembers a new flow of one entry, keyed k, not yet
 * answered. */
static always_inline void ct_note_unanswered(const struct ct_key *k)
{
	struct ct_evict_slot *slot = ct_claim_slot();

	if (!slot)
		return;
	slot->other.dir = 0;
	slot->key = *k;
}

/* ct_evict_slot removes the flow of slot i if it is still unanswered, and
 * says whether it did. */
static always_inline int ct_evict_slot(__u32 i)
{
	struct ct_evict_slot *slot = bpf_map_lookup_elem(&ct_unanswered, &i);
	struct ct_entry *e;

	if (!slot || !slot->key.dir)
		return 0;
	e = bpf_map_lookup_elem(&ct_flows, &slot->key);
	if (!e || ct_answered_state(READ_ONCE_U64(e->state), e->flags, slot->key.proto)) {
		slot->key.dir = 0; /* gone or answered: never look again */
		return 0;
	}
	bpf_map_delete_elem(&ct_flows, &slot->key);
	if (slot->other.dir)
		bpf_map_delete_elem(&ct_flows, &slot->other);
	slot->key.dir = 0;
	ct_count(CT_STAT_EARLY_DROP);
	return 1;
}

/* ct_evict_unanswered removes the oldest flow not yet answered among the
 * CT_EVICT_TRIES oldest slots the ring has not looked at, and says whether
 * it found one. A global function: verified once, on its own, and off
 * the stack of the programs that write flows (their frames are near the
 * limit). */
__attribute__((noinline)) int ct_evict_unanswered(void)
{
	struct ct_evict_ring *ring = ct_ring();
	__u64 next, oldest;

	if (!ct_early_drop || !ring)
		return 0;
	next = READ_ONCE_U64(ring->next);
	oldest = READ_ONCE_U64(ring->oldest);
	/* Past the newest slot (the last look ran beyond it, or raced):
	 * from the newest on; too far behind: the ring has overwritten
	 * those slots. Slots beyond the newest are empty or were looked at
	 * on the ring's last lap: each look empties its slot. */
	if (oldest > next)
		oldest = next;
	if (next - oldest > CT_EVICT_SLOTS)
		oldest = next - CT_EVICT_SLOTS;
	/* Eight tries, written out: the verifier cannot bound a loop on
	 * the ring's counters, and a counted one needs one more register
	 * than a call keeps, which would give the function a stack frame
	 * that the programs calling it have no room for (their frames and
	 * its share 512 bytes). */
#define CT_EVICT_TRY()                                                      \
	do {                                                                \
		if (ct_evict_slot(oldest & (CT_EVICT_SLOTS - 1))) {         \
			ring->oldest = oldest + 1;                          \
			return 1;                                           \
		}                                                           \
		oldest++;                                                   \
	} while (0)
	CT_EVICT_TRY(); CT_EVICT_TRY(); CT_EVICT_TRY(); CT_EVICT_TRY();
	CT_EVICT_TRY(); CT_EVICT_TRY(); CT_EVICT_TRY(); CT_EVICT_TRY();
#undef CT_EVICT_TRY
	ring->oldest = oldest;
	return 0;
}

/* ct_insert writes entry e under k; a full table first gives up its
 * oldest unanswered flow, looking at up to CT_EVICT_LOOKS × CT_EVICT_TRIES
 * slots: the ring's oldest slots may name flows answered since (the
 * connections of before a flood, when the flood fills the table), and
 * each look passes eight. 0, or the map's error. */
#define CT_EVICT_LOOKS 4
static always_inline int ct_evict_looks(void)
{
	return ct_evict_unanswered() || ct_evict_unanswered() || ct_evict_unanswered() || ct_evict_unanswered();
}

static always_inline int ct_insert(const struct ct_key *k, const struct ct_entry *e)
{
	int err = bpf_map_update_elem(&ct_flows, k, e, BPF_ANY);

	/* Twice: another CPU may write a new flow into the room the first
	 * eviction made before this one does (a flood on every CPU). */
	if (err == -E2BIG && ct_evict_looks())
		err = bpf_map_update_elem(&ct_flows, k, e, BPF_ANY);
	if (err == -E2BIG && ct_evict_looks())
		err = bpf_map_update_elem(&ct_flows, k, e, BPF_ANY);
	return err;
}
