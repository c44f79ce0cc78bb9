/* nat_maps.h: the NAT cube's map (logic: node_addr.h, snat.h, nat.h). */
#pragma once
#include "lib/common.h"

/* node_addrs: [NODE_ADDR_V4] and [NODE_ADDR_V6], this node's address for
 * each family (the source of SNATed flows); all zero: none. */
enum node_addr_index : __u32 { NODE_ADDR_V4 = 0, NODE_ADDR_V6 = 1, NODE_ADDR_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, enum node_addr_index);
	__type(value, struct nc_addr);
	__uint(max_entries, NODE_ADDR_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} node_addrs SEC(".maps");

/* nat_no_masq: destinations a pod's traffic keeps its own source to (the
 * cluster: every node's pod CIDRs and addresses, and the configured
 * ranges); to any other, it is masqueraded to this node. Masquerading off
 * is one entry, ::/0. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct nc_prefix);
	__type(value, __u8);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} nat_no_masq SEC(".maps");
