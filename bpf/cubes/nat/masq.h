/* masq.h: masquerading, which of a pod's destinations are outside the
 * cluster (the agent writes nat_no_masq, pkg/cubes/nat). The translation
 * itself is xlate.h's, with SNAT ports from snat.h.
 */
#pragma once
#include "lib/common.h"
#include "nat_maps.h"

/* masq_wanted says whether a pod's packet to daddr leaves the cluster,
 * and so takes this node's address as its source. */
static always_inline int masq_wanted(const struct nc_addr *daddr)
{
	struct nc_prefix k = {.prefixlen = 128, .addr = *daddr};

	return bpf_map_lookup_elem(&nat_no_masq, &k) == NULL;
}

/* nat_icmp_count counts what became of an ICMP message (nat_maps.h). */
static always_inline void nat_icmp_count(enum nat_icmp_stat stat)
{
	__u64 *n = bpf_map_lookup_elem(&nat_icmp_stats, &stat);

	if (n)
		*n += 1;
}
