/* ct_maps.h: the conntrack cube's map and its layout (logic: ct.h). */
#pragma once
#include "lib/common.h"

#ifndef CT_MAX
#define CT_MAX 65536
#endif

enum ct_dir : __u8 {
	CT_SERVICE = 1,
	CT_REPLY = 2,
};

struct ct_key {
	struct nc_addr saddr;
	struct nc_addr daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	enum ct_dir dir;
	__u16 pad;
};

enum ct_flags : __u8 {
	CT_F_EXTERNAL = 1, /* from outside the cluster, through this node */
	CT_F_SNAT = 2,     /* source translated to nat_addr:nat_port */
	CT_F_MASQ = 4,     /* a pod's flow to outside the cluster, masqueraded
			    * (with CT_F_SNAT) to this node */
	CT_F_HOST = 8,     /* CT_F_EXTERNAL to this node itself (a host-network
			    * backend): its replies leave from the host stack
			    * through the uplink, where to_net translates them */
};

struct ct_entry {
	__u32 backend_id; /* CT_SERVICE: the backend this flow is pinned to */
	__u32 rev_nat_id;
	__u64 created_ns; /* when the flow was first balanced (flow age) */
	struct nc_addr nat_addr; /* CT_F_SNAT: service: node side; reply: client */
	__be16 nat_port;
	enum ct_flags flags;
	__u8 pad;
	__u32 pad2;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct ct_key);
	__type(value, struct ct_entry);
	__uint(max_entries, CT_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} ct_flows SEC(".maps");
