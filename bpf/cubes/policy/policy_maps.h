/* policy_maps.h: the policy cube's maps and their layouts (logic:
 * policy.h). The Go side, pkg/cubes/policy, writes all but pol_flows and
 * pol_drops, which the datapath writes.
 */
#pragma once
#include "lib/common.h"

/* Reserved identities (pkg/cubes/policy/identity.go). */
enum pol_identity : __u32 {
	POL_ANY_PEER = 0, /* in an entry: every peer */
	POL_HOST = 1,     /* this node's own addresses */
	POL_WORLD = 2,    /* an address in no IP block and of no pod */
};

/* pol_peers: the identity cache. Each pod address (/32, /128), each IP
 * block region and this node's addresses, to the identity of their class.
 * IPv4 as IPv4-mapped IPv6: a /n is a /(96+n). */
struct pol_peer {
	enum pol_identity identity; /* reserved, or allocated (>= 256) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct nc_prefix);
	__type(value, struct pol_peer);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_peers SEC(".maps");

enum pol_endpoint_flags : __u8 {
	POL_ISOLATED_INGRESS = 1, /* some policy isolates what it receives */
	POL_ISOLATED_EGRESS = 2,  /* some policy isolates what it sends */
};

/* pol_endpoints: this node's pods that some policy selects, by address.
 * A pod not here is looked up no further: no policy costs nothing. */
struct pol_endpoint {
	__u32 id;
	enum pol_endpoint_flags flags;
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct nc_addr);
	__type(value, struct pol_endpoint);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_endpoints SEC(".maps");

enum pol_dir : __u8 {
	POL_INGRESS = 1,
	POL_EGRESS = 2,
};

/* pol_entries: what an endpoint may receive (send) from (to) a peer
 * identity (POL_ANY_PEER: every peer) with a protocol (0: every protocol
 * and port) on a port prefix. The prefix length counts the bits from
 * endpoint on: POL_ENTRY_BITS for a port range's fixed part, + 16 for one
 * port. */
enum pol_entry_bits : __u32 {
	POL_ENTRY_BITS = 96, /* endpoint, dir, proto, pad, peer */
};

struct pol_entry_key {
	enum pol_entry_bits prefixlen; /* POL_ENTRY_BITS + the port's bits */
	__u32 endpoint;
	enum pol_dir dir;
	__u8 proto;
	__u16 pad;
	enum pol_identity peer;
	__be16 port;
	__u16 pad2; /* past every prefix: never compared */
};

struct pol_entry {
	__u8 allow;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct pol_entry_key);
	__type(value, struct pol_entry);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_entries SEC(".maps");

/* pol_flows: the connections each endpoint opened or accepted under
 * policy (their first packet's tuple, and the endpoint: what one pod
 * allowed says nothing about another on the same node), so that their
 * later packets and their replies pass whatever the rules of the other
 * direction say. */
struct pol_flow_key {
	struct nc_addr saddr;
	struct nc_addr daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;
	__u8 pad[3];
	__u32 endpoint;
};

struct pol_flow {
	__u64 created_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct pol_flow_key);
	__type(value, struct pol_flow);
	__uint(max_entries, 65536);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_flows SEC(".maps");

/* Why a packet was dropped. */
enum pol_drop_reason : __u32 {
	POL_DROP_INGRESS = 1, /* no policy of the receiving pod allows it */
	POL_DROP_EGRESS = 2,  /* no policy of the sending pod allows it */
};

struct pol_drop_key {
	__u32 endpoint;
	enum pol_drop_reason reason;
};

/* pol_drops: packets dropped, per endpoint and reason (per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__type(key, struct pol_drop_key);
	__type(value, __u64);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_drops SEC(".maps");
