/* sock_maps.h: socket-LB's maps (part of the load-balancer cube; logic:
 * sock.h): per-socket translations, the node's configuration the socket
 * hooks read, and the target of the UDP socket iterator.
 */
#pragma once
#include "lib/common.h"

#ifndef SOCK_MAX
#define SOCK_MAX 65536
#endif

struct sock_key {
	__u64 cookie;        /* bpf_get_socket_cookie() */
	struct nc_addr addr; /* backend (revnat map) or frontend (udp map) */
	__be16 port;
	__u16 pad;
	__u32 pad2;
};

struct sock_revnat_val {
	__u32 rev_nat_id;
	__u32 pad;
};

/* Backend -> frontend, per socket: for getpeername and recvmsg. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct sock_key);
	__type(value, struct sock_revnat_val);
	__uint(max_entries, SOCK_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock_revnat SEC(".maps");

/* What an unconnected UDP socket was translated to: its last SOCK_SENT_MAX
 * frontends and their backends, kept with the socket (socket-local
 * storage, freed with it) so that the socket's entries in
 * sock_udp_backend and sock_revnat leave with it (sock_release). Older
 * ones are left to those maps' LRU. */
#define SOCK_SENT_MAX 4

struct sock_sent_one {
	struct nc_addr frontend;
	struct nc_addr backend;
	__be16 fport;
	__be16 bport;
	__u32 pad;
};

struct sock_sent {
	struct sock_sent_one last[SOCK_SENT_MAX];
	__u32 next; /* slot of the next one (ring) */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sock_sent);
	__uint(pinning, LIBBPF_PIN_BY_NAME); /* a restarted agent's programs read the same */
} sock_sent SEC(".maps");

/* Frontend -> backend id, per unconnected UDP socket: keeps a socket's
 * datagrams to one Service on one backend, as conntrack does for a 5-tuple. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct sock_key);
	__type(value, __u32);
	__uint(max_entries, SOCK_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} sock_udp_backend SEC(".maps");

/* node_config[0]: what the socket hooks need to know of the node. */
/* The agent marks its own sockets in the NodePort range with this (SO_MARK):
 * the Services' health-check node ports, which it serves on the node, come
 * from that range. */
enum lb_sock_mark : __u32 { LB_AGENT_SOCK_MARK = 0x4e430001 };

struct node_config {
	__u64 netns_cookie;  /* the node's own network namespace (not a pod's) */
	__u16 nodeport_min;  /* the NodePort range, protected from bind() */
	__u16 nodeport_max;
	enum lb_sock_mark agent_mark; /* sockets with this mark may bind there; 0: none */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct node_config);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} node_config SEC(".maps");

/* sock_destroy_target[0]: the backend whose connected sockets to close,
 * and the frontend (revNAT id) it left: a socket connected to it through
 * another Service that still has it stays. */
struct sock_destroy_target {
	struct nc_addr addr;
	__be16 port;
	__u16 pad;
	__u32 rev_nat_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct sock_destroy_target);
	__uint(max_entries, 1);
} sock_destroy_target SEC(".maps");
