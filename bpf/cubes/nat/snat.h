/* snat.h: SNAT port allocation. A flow from outside the cluster that is
 * source-translated to this node gets a source port no other flow to the
 * same backend holds; conntrack (ct_reply_taken) says which are held.
 */
#pragma once
#include "lib/common.h"
#include "lib/parse.h"
#include "cubes/ct/ct.h"

/* SNAT source ports: above the kernel's default ephemeral range
 * (32768-60999), so this node's own connections never hold one. */
enum snat_ports {
	SNAT_PORT_MIN = 61000,
	SNAT_PORT_SPAN = 4536, /* up to 65535 */
	SNAT_TRIES = 16,       /* ports probed before giving up */
};

/* snat_port picks a port of addr not in use towards the backend: the
 * client's port if it is in the range, else from a hash of the flow,
 * probing a few neighbours. Returns 0 when all are taken. */
static always_inline __be16 snat_port(const struct flow *f, const struct nc_addr *addr,
				      const struct nc_addr *baddr, __be16 bport)
{
	__u32 start = bpf_ntohs(f->sport);

	if (start < SNAT_PORT_MIN || start >= SNAT_PORT_MIN + SNAT_PORT_SPAN)
		start = SNAT_PORT_MIN + (f->saddr.w[3] ^ f->sport ^ nc_random()) % SNAT_PORT_SPAN;
	for (int i = 0; i < SNAT_TRIES; i++) {
		__u32 p = start + i;

		if (p >= SNAT_PORT_MIN + SNAT_PORT_SPAN)
			p -= SNAT_PORT_SPAN;
		if (!ct_reply_taken(baddr, bport, addr, bpf_htons(p), f->proto))
			return bpf_htons(p);
	}
	return 0;
}
