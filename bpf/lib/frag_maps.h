/* frag_maps.h: the ports of fragmented datagrams (logic: frag.h). */
#pragma once
#include "common.h"

#ifndef FRAG_MAX
#define FRAG_MAX 8192
#endif

/* A datagram is named by its addresses, protocol and IP identification. */
struct frag_key {
	struct nc_addr saddr;
	struct nc_addr daddr;
	__u32 id; /* IPv4: the 16-bit ID; IPv6: the fragment header's 32 bits */
	__u8 proto;
	__u8 pad[3];
};

struct frag_ports {
	__be16 sport;
	__be16 dport;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct frag_key);
	__type(value, struct frag_ports);
	__uint(max_entries, FRAG_MAX);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} frag_datagrams SEC(".maps");
