/* policy_maps.h: the policy cube's maps and their layouts (logic:
 * policy.h). The Go side, pkg/cubes/policy, writes all but pol_drops,
 * which the datapath writes. The connections policy allowed are
 * conntrack's entries (CT_POLICY, cubes/ct/ct_maps.h).
 */
#pragma once
#include "lib/common.h"
#include "cubes/ct/ct_maps.h"

/* Reserved identities (pkg/cubes/policy/identity.go). */
enum pol_identity : __u32 {
	POL_ANY_PEER = 0, /* in an entry: every peer */
	POL_HOST = 1,     /* this node's own addresses */
	POL_WORLD = 2,    /* an address in no IP block and of no pod */
};

/* pol_peers: the identity cache's prefixes: each IP block region, to the
 * identity of its class (single addresses: pol_hosts, below). IPv4 as
 * IPv4-mapped IPv6: a /n is a /(96+n). */
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

/* pol_hosts: the identity cache's single addresses (each pod's, this
 * node's own), exact. A pod peer costs one hash lookup, where pol_peers'
 * trie walks a node per bit that differs; pol_peers keeps the prefixes
 * (IP block regions), looked up for an address not here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct nc_addr);
	__type(value, struct pol_peer);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_hosts SEC(".maps");

enum pol_endpoint_flags : __u8 {
	POL_ISOLATED_INGRESS = 1, /* some policy isolates what it receives */
	POL_ISOLATED_EGRESS = 2,  /* some policy isolates what it sends */
};

/* pol_endpoints: this node's pods that some policy selects, by address.
 * A pod not here is looked up no further: no policy costs nothing. id
 * names the pod (pol_drops, the verdict events); rule_set is the number
 * its rules are filed under in pol_entries, shared by this node's pods
 * of one namespace with the same labels and named ports: the same
 * policies select them and give them the same rules, so a new peer
 * identity is written once per rule set, not once per pod. A rule set's
 * number has the high bit set: never a pod's, under which an agent before
 * rule sets filed its entries. */
struct pol_endpoint {
	__u32 id;
	__u32 rule_set;
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

/* pol_entries: what the endpoints of a rule set may receive (send) from
 * (to) a peer identity (POL_ANY_PEER: every peer) with a protocol on a
 * port prefix: the port ranges (single ports and every protocol: in
 * pol_rules, below). The prefix length counts the bits from rule_set on:
 * POL_ENTRY_BITS for a port range's fixed part, + 16 for one port. */
enum pol_entry_bits : __u32 {
	POL_ENTRY_BITS = 96, /* rule_set, dir, proto, pad, peer */
};

struct pol_entry_key {
	enum pol_entry_bits prefixlen; /* POL_ENTRY_BITS + the port's bits */
	__u32 rule_set;
	enum pol_dir dir;
	__u8 proto;
	__u16 pad;
	enum pol_identity peer;
	__be16 port;
	__u16 pad2; /* past every prefix: never compared */
};

/* allow: 1 allows; 0 denies, which only a tier set's entries do
 * (ClusterNetworkPolicy, pkg/cubes/policy/tiers.go: their rule sets hold a
 * complete verdict, so a lookup ends on the first entry found). */
struct pol_entry {
	__u8 allow;
};

/* pol_rules: the entries that name one port, or every protocol, exact:
 * keyed as pol_entries' keys are, with prefixlen POL_ENTRY_BITS + 16 (and
 * port 0 for every protocol). A rule for one port costs one hash lookup,
 * where pol_entries' trie walks a node per bit that differs; pol_entries
 * keeps the port ranges (a protocol's every port is one), looked up after
 * a miss here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct pol_entry_key);
	__type(value, struct pol_entry);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct pol_entry_key);
	__type(value, struct pol_entry);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_entries SEC(".maps");

/* pol_revision: the revision of the rules, which the agent raises after
 * each change it writes. A connection's verdict (in its conntrack entry)
 * holds the revision it was given under: under another, the connection's
 * next packet is judged again, so a policy change applies to the
 * connections already open, and none is forgotten by a flush. */
struct pol_rev {
	__u32 rev;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct pol_rev);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_revision SEC(".maps");

/* pol_scratch (per CPU, one entry): pol_check's keys and new conntrack
 * entry, off the stack (the programs that judge a packet in several
 * places, from_net's deliveries, are close to the 512 bytes). */
struct pol_scratch {
	struct ct_key key;
	struct ct_entry entry;
	struct nc_prefix peer;     /* pol_peers */
	struct pol_entry_key rule; /* pol_entries */
	/* The packet's: kept here, not in registers spilled to the stack. */
	__u64 now;
	__u32 rev;     /* pol_revision's */
	__u32 peer_id; /* the peer's identity, once judged */
	__u8 swapped;  /* the packet's source is the key's daddr */
	__u8 reply;    /* the packet goes its connection's reply way */
	__u8 role;     /* the pod is its connection's source (POL_EGRESS) */
	__u8 bit;      /* the verdict bit of that side */
	/* The memo (policy.h, pol_memo_*): the last egress check on this CPU
	 * leaves its key and direction in key and swapped above, so that the
	 * same packet's ingress check, when the packet goes to a pod of this
	 * node, need not look its connection up again. */
	struct ct_key next_key; /* the ingress check's key, while compared */
	__u32 memo_rev;          /* the rules' revision the memo holds under */
	__u8 memo_valid;         /* set by an egress check, cleared by its use */
	__u8 memo_flags;         /* the TCP flags of the packet that left it */
	__u8 memo_pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct pol_scratch);
	__uint(max_entries, 1);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} pol_scratch SEC(".maps");

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
