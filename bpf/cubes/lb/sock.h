/* sock.h: socket-LB, the load-balancer cube at the socket. Translates a
 * Service address to a backend once, when a pod's socket connects (or
 * sends an unconnected datagram), so the packets of that flow are never
 * touched again. It remembers, per socket, which backend stands for which
 * frontend so that getpeername() and recvmsg() report the Service address
 * the application asked for; and it keeps the NodePort range from bind()
 * on the node. */
#pragma once
#include "lib/common.h"
#include "lb.h"
#include "sock_maps.h"
#include "cubes/monitor/monitor.h"

/* sock_remember_sent records, with an unconnected UDP socket, that it
 * sent to frontend fe:fport through backend b (sock_sent). */
static always_inline void sock_remember_sent(struct bpf_sock_addr *ctx, const struct nc_addr *fe,
					     __be16 fport, const struct lb_backend *b)
{
	struct bpf_sock *sk = ctx->sk;
	struct sock_sent *s;
	__u32 i;

	if (!sk)
		return;
	s = bpf_sk_storage_get(&sock_sent, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		return;
	i = s->next & (SOCK_SENT_MAX - 1);
	s->last[i].frontend = *fe;
	s->last[i].fport = fport;
	s->last[i].backend = b->addr;
	s->last[i].bport = b->port;
	s->next++;
}

/* sock_report reports a socket's connection (or a datagram's first send)
 * to frontend addr:port: refused (backend NULL: no endpoints), or
 * translated to backend (a trace event, when the agent asks). The socket's
 * own address is not known yet: the event has none. */
static always_inline void sock_report(struct bpf_sock_addr *ctx, const struct nc_addr *addr, __be16 port, __u8 proto,
				      const struct lb_backend *backend, __u32 rev_nat_id)
{
	struct flow f = {
		.daddr = *addr,
		.dport = port,
		.proto = proto,
		.family = addr_is_v4(addr) ? 4 : 6,
		.point = MON_AT_SOCK,
	};
	struct mon_detail d = {.type = MON_EV_DROP, .drop = MON_DROP_NO_ENDPOINTS, .svc = rev_nat_id};

	if (!backend) {
		mon_count(&monitor_drops, MON_DROP_NO_ENDPOINTS);
		if (!mon_wanted(MON_F_DROPS))
			return;
	} else {
		if (!mon_wanted(MON_F_TRACE))
			return;
		d.type = MON_EV_TRACE;
		d.drop = MON_DROP_NONE;
		d.trace = MON_TR_SOCK_LB;
		d.xaddr = &backend->addr;
		d.xport = backend->port;
	}
	d.netns = bpf_get_netns_cookie(ctx);
	mon_report(NULL, &f, MON_AT_SOCK, &d);
}

/* sock_translate maps *addr:*port (a frontend) to a backend in place.
 * Returns 1 to let the syscall go on, 0 to fail it with ECONNREFUSED. */
static always_inline int sock_translate(struct bpf_sock_addr *ctx, struct nc_addr *addr, __be16 *port,
					__u8 proto, int sticky)
{
	struct lb_svc_val *svc = lb_lookup_service_inside(addr, *port, proto);
	struct sock_key key = {
		.cookie = bpf_get_socket_cookie(ctx),
		.addr = *addr,
		.port = *port,
	};
	struct lb_backend *backend = NULL;
	__u32 backend_id = 0, *pinned;

	if (!svc)
		return 1; /* not a Service */
	if (svc->flags & LB_SVC_SOURCE_RANGES)
		return 1; /* the pod's address decides: the tc path checks it */

	if (sticky) {
		pinned = bpf_map_lookup_elem(&sock_udp_backend, &key);
		if (pinned) {
			backend_id = *pinned;
			backend = lb_lookup_backend(backend_id);
		}
	}
	int pinned_hit = backend != NULL; /* already remembered (sock_sent) */
	if (!backend) {
		/* The client is the pod: its network namespace, known at connect
		 * time, where its source address may not be yet. */
		__u64 netns = bpf_get_netns_cookie(ctx);
		struct nc_addr client = { .w = { (__u32)netns, (__u32)(netns >> 32), 0xffffffff, 0 } };

		/* Maglev hashes flows, and a socket has no source port yet:
		 * at connect time the choice is random (as Cilium's socket-LB). */
		struct lb_svc_val choice = *svc;

		choice.flags &= ~LB_SVC_MAGLEV;
		backend_id = lb_pick(&client, 0, addr, *port, proto, &choice);
		backend = backend_id ? lb_lookup_backend(backend_id) : NULL;
	}
	if (!backend) {
		/* A Local policy without a local endpoint drops rather than
		 * refuses: left untranslated, the packets meet from_pod, which
		 * drops them. */
		if (svc->flags & LB_SVC_LOCAL)
			return 1;
		sock_report(ctx, addr, *port, proto, NULL, svc->rev_nat_id);
		bpf_set_retval(-ECONNREFUSED);
		return 0;
	}
	if (sticky && !pinned_hit) {
		bpf_map_update_elem(&sock_udp_backend, &key, &backend_id, BPF_ANY);
		sock_remember_sent(ctx, addr, *port, backend);
	}
	if (!pinned_hit)
		sock_report(ctx, addr, *port, proto, backend, svc->rev_nat_id);

	struct sock_revnat_val rn = { .rev_nat_id = svc->rev_nat_id };
	key.addr = backend->addr;
	key.port = backend->port;
	bpf_map_update_elem(&sock_revnat, &key, &rn, BPF_ANY);

	*addr = backend->addr;
	*port = backend->port;
	return 1;
}

/* sock_forget drops what socket-LB remembered of a socket that is being
 * released: a connected socket's reverse translation, keyed by its cookie
 * and the backend it is connected to (peer:port); an unconnected UDP
 * socket's, for the frontends it last sent to (sock_sent): their backend
 * and reverse translation. */
static always_inline void sock_forget(struct bpf_sock *sk, const struct nc_addr *peer, __be16 port)
{
	struct sock_key key = {
		.cookie = bpf_get_socket_cookie(sk),
		.addr = *peer,
		.port = port,
	};
	struct sock_sent *s;

	bpf_map_delete_elem(&sock_revnat, &key);
	s = bpf_sk_storage_get(&sock_sent, sk, 0, 0);
	if (!s)
		return;
	for (__u32 i = 0; i < SOCK_SENT_MAX; i++) {
		if (i >= s->next)
			break;
		key.addr = s->last[i].frontend;
		key.port = s->last[i].fport;
		bpf_map_delete_elem(&sock_udp_backend, &key);
		key.addr = s->last[i].backend;
		key.port = s->last[i].bport;
		bpf_map_delete_elem(&sock_revnat, &key);
	}
}

/* sock_reverse maps a backend address seen by the socket back to the
 * frontend the application addressed. */
static always_inline void sock_reverse(void *ctx, struct nc_addr *addr, __be16 *port)
{
	struct sock_key key = {
		.cookie = bpf_get_socket_cookie(ctx),
		.addr = *addr,
		.port = *port,
	};
	struct sock_revnat_val *rn = bpf_map_lookup_elem(&sock_revnat, &key);
	struct lb_frontend *fe;

	if (!rn)
		return;
	fe = lb_lookup_revnat(rn->rev_nat_id);
	if (!fe)
		return;
	*addr = fe->addr;
	*port = fe->port;
}

/* NodePort bind protection: on the node itself (its network namespace; a
 * pod's is its own), no process but the agent may bind a port of the
 * NodePort range, so none can hold a port a NodePort Service will need
 * (Cilium does the same). */
static always_inline int sock_bind_allowed(struct bpf_sock_addr *ctx)
{
	__u32 zero = 0, port = bpf_ntohs((__be16)ctx->user_port);
	struct node_config *c = bpf_map_lookup_elem(&node_config, &zero);
	struct bpf_sock *sk = ctx->sk;

	if (!c || !c->netns_cookie || c->netns_cookie != bpf_get_netns_cookie(ctx))
		return 1;
	if (port < c->nodeport_min || port > c->nodeport_max)
		return 1;
	if (c->agent_mark && sk && sk->mark == c->agent_mark)
		return 1;
	bpf_set_retval(-EADDRINUSE);
	return 0;
}
