/* The floor of netcube's same-node path: a tc ingress program on each
 * host-side veth that does nothing but bpf_redirect_peer into the other
 * pod (no parsing, no map). IFA, IFB: the host-side veths' ifindexes. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int redir(struct __sk_buff *skb)
{
	return bpf_redirect_peer(skb->ifindex == IFA ? IFB : IFA, 0);
}

char LICENSE[] SEC("license") = "GPL";
