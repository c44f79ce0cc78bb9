/* sock_lb.c: socket-level load balancing, attached to the pods' cgroup.
 * Thin entry points: each converts the hook's address to the common form,
 * calls socket-LB (cubes/lb/sock.h) and writes the result back. */
#include "cubes/lb/sock.h"

/* ctx_proto: the protocols these hooks see. Not SCTP: the kernel runs no
 * cgroup connect or sendmsg hook for an SCTP socket. Its connect() is
 * sctp_inet_connect -> sctp_connect -> __sctp_connect (net/sctp/socket.c),
 * which never calls BPF_CGROUP_RUN_PROG_INET{4,6}_CONNECT (run by TCP's
 * and UDP's pre_connect, tcp_v4_pre_connect and udp_pre_connect, from
 * inet_stream_connect/inet_dgram_connect, neither in SCTP's proto_ops;
 * sctp_prot has no pre_connect), nor do sctp_sendmsg and sctp_recvmsg run
 * the UDP sendmsg/recvmsg hooks (udp_sendmsg, udp_recvmsg do). So a pod's
 * SCTP association with a Service is translated per packet, by from_pod
 * and to_pod (tc_pod.c), and its peer name stays the frontend's. */
static always_inline int ctx_proto(struct bpf_sock_addr *ctx)
{
	return ctx->protocol == IPPROTO_TCP || ctx->protocol == IPPROTO_UDP ? ctx->protocol : 0;
}

/* The IPv6 address fields of the context must be read and written as
 * 32-bit words. */
static always_inline void ctx_get6(const struct bpf_sock_addr *ctx, struct nc_addr *a)
{
	a->w[0] = ctx->user_ip6[0];
	a->w[1] = ctx->user_ip6[1];
	a->w[2] = ctx->user_ip6[2];
	a->w[3] = ctx->user_ip6[3];
}

static always_inline void ctx_set6(struct bpf_sock_addr *ctx, const struct nc_addr *a)
{
	ctx->user_ip6[0] = a->w[0];
	ctx->user_ip6[1] = a->w[1];
	ctx->user_ip6[2] = a->w[2];
	ctx->user_ip6[3] = a->w[3];
}

static always_inline int translate4(struct bpf_sock_addr *ctx, int sticky)
{
	struct nc_addr addr;
	__be16 port = (__be16)ctx->user_port;
	__u8 proto = ctx_proto(ctx);
	int ret;

	if (!proto)
		return 1;
	addr_from_v4(&addr, ctx->user_ip4);
	ret = sock_translate(ctx, &addr, &port, proto, sticky);
	ctx->user_ip4 = addr.w[3];
	ctx->user_port = port;
	return ret;
}

static always_inline int translate6(struct bpf_sock_addr *ctx, int sticky)
{
	struct nc_addr addr;
	__be16 port = (__be16)ctx->user_port;
	__u8 proto = ctx_proto(ctx);
	int ret;

	if (!proto)
		return 1;
	ctx_get6(ctx, &addr);
	ret = sock_translate(ctx, &addr, &port, proto, sticky);
	ctx_set6(ctx, &addr);
	ctx->user_port = port;
	return ret;
}

static always_inline int reverse4(struct bpf_sock_addr *ctx)
{
	struct nc_addr addr;
	__be16 port = (__be16)ctx->user_port;

	addr_from_v4(&addr, ctx->user_ip4);
	sock_reverse(ctx, &addr, &port);
	ctx->user_ip4 = addr.w[3];
	ctx->user_port = port;
	return 1;
}

static always_inline int reverse6(struct bpf_sock_addr *ctx)
{
	struct nc_addr addr;
	__be16 port = (__be16)ctx->user_port;

	ctx_get6(ctx, &addr);
	sock_reverse(ctx, &addr, &port);
	ctx_set6(ctx, &addr);
	ctx->user_port = port;
	return 1;
}

SEC("cgroup/bind4")
int sock_bind4(struct bpf_sock_addr *ctx) { return sock_bind_allowed(ctx); }

SEC("cgroup/bind6")
int sock_bind6(struct bpf_sock_addr *ctx) { return sock_bind_allowed(ctx); }

SEC("cgroup/connect4")
int sock_connect4(struct bpf_sock_addr *ctx) { return translate4(ctx, 0); }

SEC("cgroup/connect6")
int sock_connect6(struct bpf_sock_addr *ctx) { return translate6(ctx, 0); }

SEC("cgroup/sendmsg4")
int sock_sendmsg4(struct bpf_sock_addr *ctx) { return translate4(ctx, 1); }

SEC("cgroup/sendmsg6")
int sock_sendmsg6(struct bpf_sock_addr *ctx) { return translate6(ctx, 1); }

SEC("cgroup/recvmsg4")
int sock_recvmsg4(struct bpf_sock_addr *ctx) { return reverse4(ctx); }

SEC("cgroup/recvmsg6")
int sock_recvmsg6(struct bpf_sock_addr *ctx) { return reverse6(ctx); }

SEC("cgroup/getpeername4")
int sock_getpeername4(struct bpf_sock_addr *ctx) { return reverse4(ctx); }

SEC("cgroup/getpeername6")
int sock_getpeername6(struct bpf_sock_addr *ctx) { return reverse6(ctx); }

#ifndef AF_INET
#define AF_INET 2
#define AF_INET6 10
#endif

/* A socket going away takes its translation with it (sock_revnat would
 * otherwise keep it until the LRU evicts it). */
SEC("cgroup/sock_release")
int sock_release(struct bpf_sock *sk)
{
	/* Every field read once, volatile, at its own offset: the verifier
	 * refuses the context pointer the compiler would otherwise compute
	 * to share one load between the branches. */
	__u32 family = *(volatile __u32 *)&sk->family, dst4 = *(volatile __u32 *)&sk->dst_ip4;
	struct nc_addr peer = { .w = {
		*(volatile __u32 *)&sk->dst_ip6[0], *(volatile __u32 *)&sk->dst_ip6[1],
		*(volatile __u32 *)&sk->dst_ip6[2], *(volatile __u32 *)&sk->dst_ip6[3],
	} };
	__be16 port = *(volatile __be16 *)&sk->dst_port;

	if (family == AF_INET)
		addr_from_v4(&peer, dst4);
	else if (family != AF_INET6)
		return 1;
	sock_forget(sk, &peer, port);
	return 1;
}
