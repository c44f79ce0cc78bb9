/* sock_destroy.c: closes the connected UDP sockets of a backend that left
 * its Service. Socket-LB translates a connected UDP socket once, at
 * connect(), so its datagrams never pass a hook again; when the backend
 * goes, the agent runs this iterator in each pod's network namespace, and
 * the applications see the socket fail and connect again, to a live
 * backend (Cilium does the same). TCP needs nothing: its connections to a
 * removed backend are the ones kube-proxy keeps too.
 *
 * Kernel structures are declared here with only the fields read, relocated
 * against the running kernel's BTF (CO-RE).
 */
#include "lib/common.h"
#include "cubes/lb/sock.h"

struct sock_common {
	__be32 skc_daddr;
	__be16 skc_dport;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct udp_sock;

struct bpf_iter_meta;

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

#ifndef AF_INET
#define AF_INET 2
#define AF_INET6 10
#endif

SEC("iter/udp")
int destroy_udp(struct bpf_iter__udp *ctx)
{
	struct sock_common *sk = (struct sock_common *)ctx->udp_sk;
	struct sock_destroy_target *t;
	struct nc_addr daddr;
	__u32 zero = 0;

	if (!sk)
		return 0;
	t = bpf_map_lookup_elem(&sock_destroy_target, &zero);
	if (!t || sk->skc_dport != t->port)
		return 0;
	if (sk->skc_family == AF_INET)
		addr_from_v4(&daddr, sk->skc_daddr);
	else if (sk->skc_family == AF_INET6)
		addr_from_v6(&daddr, sk->skc_v6_daddr.in6_u.u6_addr32);
	else
		return 0;
	if (daddr.w[0] != t->addr.w[0] || daddr.w[1] != t->addr.w[1] ||
	    daddr.w[2] != t->addr.w[2] || daddr.w[3] != t->addr.w[3])
		return 0;

	/* Connected through the frontend the backend left? (connect()
	 * recorded it for getpeername.) */
	struct sock_key k = {
		.cookie = bpf_get_socket_cookie(sk),
		.addr = t->addr,
		.port = t->port,
	};
	struct sock_revnat_val *rn = bpf_map_lookup_elem(&sock_revnat, &k);

	if (!rn || rn->rev_nat_id != t->rev_nat_id)
		return 0;
	bpf_sock_destroy(sk);
	return 0;
}
