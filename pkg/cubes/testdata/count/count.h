/* count.h: the counting cube, an example of the smallest cube there is.
 * It counts the packets each tc entry program sees, by hook point. It is
 * added to a copy of the tree by pkg/cubes' TestAddingACube, to show that
 * a cube is this header, its Go package and one line in the registry. */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "lib/hook.h"

enum count_hook : __u32 {
	COUNT_FROM_POD = 0,
	COUNT_TO_POD = 1,
	COUNT_FROM_NET = 2,
	COUNT_HOOKS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, enum count_hook);
	__type(value, __u64);
	__uint(max_entries, COUNT_HOOKS);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} count_packets SEC(".maps");

static always_inline int count_packet(enum count_hook hook)
{
	__u64 *n = bpf_map_lookup_elem(&count_packets, &hook);

	if (n)
		(*n)++;
	return CUBE_PASS;
}

static always_inline int count_from_pod(struct __sk_buff *skb, const struct flow *f)
{
	return count_packet(COUNT_FROM_POD);
}

static always_inline int count_to_pod(struct __sk_buff *skb, const struct flow *f)
{
	return count_packet(COUNT_TO_POD);
}

static always_inline int count_from_net(struct __sk_buff *skb, const struct flow *f)
{
	return count_packet(COUNT_FROM_NET);
}
