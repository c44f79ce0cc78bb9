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

/* What became of the ICMP messages the datapath read (entry/xlate_icmp.h):
 * per CPU, summed by the agent (netcube_nat_icmp_total). Nothing is ever
 * translated on a guess: an error that cannot be matched to a flow passes
 * as it is. */
enum nat_icmp_stat : __u32 {
	NAT_ICMP_ECHO_MASQ = 0,   /* echo requests of a pod masqueraded to outside */
	NAT_ICMP_ECHO_NO_ID,      /* echo requests dropped: no identifier free */
	NAT_ICMP_ERR_XLATED,      /* errors translated back to the pod whose flow they answer */
	NAT_ICMP_ERR_SHORT,       /* errors passed as they are: the quote too short to read */
	NAT_ICMP_ERR_UNTRACKED,   /* errors passed as they are: quoting a packet of no translated flow */
	NAT_ICMP_ERR_BAD,         /* errors dropped: matched a flow, but could not be rewritten */
	NAT_ICMP_STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, enum nat_icmp_stat);
	__type(value, __u64);
	__uint(max_entries, NAT_ICMP_STAT_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} nat_icmp_stats SEC(".maps");
