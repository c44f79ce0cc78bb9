/* headers.c: the cubes' headers under test, one operation at a time
 * (conntrack and its lifecycle, SNAT port allocation, the flow hash,
 * session affinity), run
 * with BPF_PROG_RUN by internal/bpftest. The clock and the random numbers
 * are the test's, so that timeouts and random choices are exact; and two
 * ways to compose eight cubes (inlined calls, tail calls) are measured.
 */
#define nc_now() fake_now()
#define nc_random() fake_random()
#include "lib/common.h"

/* Set by the test before each run. */
volatile __u64 fake_now_ns;
volatile __u32 fake_random_u32;

static always_inline __u64 fake_now(void) { return fake_now_ns; }
static always_inline __u32 fake_random(void) { return fake_random_u32; }

#include "cubes/ct/ct.h"
#include "cubes/nat/snat.h"
#include "cubes/lb/lb.h"

enum test_op : __u32 {
	OP_CT_CREATE = 1, /* ct_create_flow(flow, backend, ...) */
	OP_CT_LOOKUP,     /* ct_lookup(flow, dir) -> entry */
	OP_CT_MATCHES,    /* ct_reply_of(flow, entry of flow, backend) != NULL */
	OP_CT_FORGET,     /* ct_forget_reply(flow) */
	OP_SNAT_PORT,     /* snat_port(flow, snat_addr, backend) -> port */
	OP_HASH,          /* lb_hash_flow(flow) -> hash */
	OP_PICK,          /* lb_pick(flow's client, svc) -> backend id */
	OP_CT_FORWARD,    /* a client's packet (flow, its flags) of the flow to
			   * backend: ret 1 if conntrack follows it
			   * (ct_established), result 1 if it ended the flow */
	OP_CT_BACKWARD,   /* a backend's packet (flow) of the flow to
			   * snat_addr:snat_port (the frontend): the same */
};

/* One operation: its inputs, and its outputs. */
struct test_io {
	enum test_op op;
	enum ct_dir dir;
	enum ct_flags flags;
	enum snat_ports unused; /* brings SNAT_PORT_* to the Go side */
	struct flow f;
	__u32 backend_id;
	__u32 rev_nat_id;
	struct nc_addr baddr;
	__be16 bport;
	__be16 snat_port;
	struct nc_addr snat_addr;
	struct lb_svc_val svc;
	/* out */
	__s32 ret;
	__u32 result;
	struct ct_entry entry;
};

struct test_io io;

/* forward: a client's packet, as xlate_established follows it. */
static always_inline void forward(void)
{
	struct ct_entry *s = ct_lookup(&io.f, CT_SERVICE), *r;
	struct ct_key sk, rk;

	s = ct_established(&io.f, s, &io.baddr, io.bport, &r, &rk, nc_now());
	io.ret = s != NULL;
	if (!s)
		return;
	io.result = ct_observe(s, r, &io.f, CT_SERVICE, nc_now());
	if (io.result) {
		ct_key_from_flow(&sk, &io.f, CT_SERVICE);
		ct_remove(&sk, &rk);
	}
}

/* backward: a backend's packet, as xlate_track_reply follows it (the
 * service entry looked up only when the packet is news). */
static always_inline void backward(void)
{
	struct ct_entry *r = ct_lookup(&io.f, CT_REPLY), *s = NULL;
	struct ct_key sk = {}, rk;

	io.ret = r != NULL;
	if (!r)
		return;
	if (ct_news(r, &io.f, CT_REPLY, nc_now())) {
		sk.saddr = io.f.daddr;
		sk.sport = io.f.dport;
		sk.daddr = io.snat_addr;
		sk.dport = io.snat_port;
		sk.proto = io.f.proto;
		sk.dir = CT_SERVICE;
		s = bpf_map_lookup_elem(&ct_flows, &sk);
	}
	io.result = ct_observe(r, s, &io.f, CT_REPLY, nc_now());
	if (io.result) {
		ct_key_from_flow(&rk, &io.f, CT_REPLY);
		ct_remove(&rk, s ? &sk : NULL);
	}
}

SEC("tc")
int run(struct __sk_buff *skb)
{
	struct ct_entry *e;
	struct ct_key k;

	io.ret = 0;
	switch (io.op) {
	case OP_CT_CREATE:
		io.ret = ct_create_flow(&io.f, io.backend_id, &io.baddr, io.bport, io.rev_nat_id,
					io.flags, &io.snat_addr, io.snat_port);
		break;
	case OP_CT_LOOKUP:
		e = ct_lookup(&io.f, io.dir);
		io.ret = e ? 1 : 0;
		if (e)
			io.entry = *e;
		break;
	case OP_CT_MATCHES:
		e = ct_lookup(&io.f, CT_SERVICE);
		io.ret = e && ct_reply_of(&io.f, e, &io.baddr, io.bport, &k) != NULL;
		break;
	case OP_CT_FORGET:
		ct_forget_reply(&io.f);
		break;
	case OP_SNAT_PORT:
		io.result = bpf_ntohs(snat_port(&io.f, &io.snat_addr, &io.baddr, io.bport));
		break;
	case OP_HASH:
		io.result = lb_hash_flow(&io.f.saddr, io.f.sport, &io.f.daddr, io.f.dport, io.f.proto);
		break;
	case OP_PICK:
		io.result = lb_pick(&io.f.saddr, io.f.sport, &io.f.daddr, io.f.dport, io.f.proto, &io.svc);
		break;
	case OP_CT_FORWARD:
		forward();
		break;
	case OP_CT_BACKWARD:
		backward();
		break;
	default:
		io.ret = -1;
	}
	return TC_ACT_OK;
}

/* Composition: eight trivial cubes (each counts the packet), called inline
 * in one program, or each in its own program reached by a tail call. */
#define CHAIN 8

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, CHAIN);
} chain_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, CHAIN);
} chain_progs SEC(".maps");

static always_inline void chain_cube(__u32 i)
{
	__u64 *n = bpf_map_lookup_elem(&chain_counts, &i);

	if (n)
		(*n)++;
}

SEC("tc")
int chain_inline(struct __sk_buff *skb)
{
	for (__u32 i = 0; i < CHAIN; i++)
		chain_cube(i);
	return TC_ACT_OK;
}

#define TAIL(i)                                         \
	SEC("tc")                                       \
	int chain_tail##i(struct __sk_buff *skb)        \
	{                                               \
		chain_cube(i);                          \
		bpf_tail_call(skb, &chain_progs, i + 1); \
		return TC_ACT_OK;                       \
	}
TAIL(0) TAIL(1) TAIL(2) TAIL(3) TAIL(4) TAIL(5) TAIL(6) TAIL(7)

char __license[] SEC("license") = "Dual BSD/GPL";
