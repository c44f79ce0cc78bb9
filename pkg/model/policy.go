package model

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"
)

// PolicyID names a NetworkPolicy.
type PolicyID struct {
	Namespace, Name string
}

func (p PolicyID) String() string { return p.Namespace + "/" + p.Name }

// PodID names a pod.
type PodID struct {
	Namespace, Name string
}

func (p PodID) String() string { return p.Namespace + "/" + p.Name }

// Pod is what the policy cube reads of a pod: who it is (namespace,
// labels), where (IPs, node) and its named ports.
type Pod struct {
	ID     PodID
	Labels map[string]string
	IPs    []netip.Addr
	Node   string
	// HostNetwork pods share their node's addresses: no policy selects
	// them, and their traffic is the node's.
	HostNetwork bool
	Ports       []NamedPort
	// EgressBandwidth and IngressBandwidth are its
	// kubernetes.io/egress-bandwidth and ingress-bandwidth annotations,
	// in bits per second (0: none).
	EgressBandwidth, IngressBandwidth uint64
}

// NamedPort is a container port with a name, which policies may use.
type NamedPort struct {
	Name  string
	Port  uint16
	Proto Proto
}

// Namespace is a namespace's name and labels (namespaceSelector).
type Namespace struct {
	Name   string
	Labels map[string]string
}

// Policy is a NetworkPolicy: the pods of its namespace it selects, the
// directions it isolates them in, and the traffic it allows them.
type Policy struct {
	ID PolicyID
	// Pods selects the pods of the policy's namespace it applies to.
	Pods labels.Selector
	// IsolatesIngress, IsolatesEgress: its policyTypes. A selected pod is
	// isolated in a direction once any policy selecting it isolates it
	// there; it may then receive (send) only what some such policy allows.
	IsolatesIngress, IsolatesEgress bool
	Ingress, Egress                 []PolicyRule
}

// PolicyRule allows traffic with any of Peers (none: every peer) on any of
// Ports (none: every port of every protocol).
type PolicyRule struct {
	Peers []PolicyPeer
	Ports []PolicyPort
}

// PolicyPeer is one from/to entry: pods by selectors, or an IP block.
type PolicyPeer struct {
	// Pods selects pods (nil: every pod) in the namespaces Namespaces
	// selects (nil: the policy's own namespace). Both nil: an IP block.
	Pods, Namespaces labels.Selector
	Block            *IPBlock
}

// IPBlock is an ipBlock: the addresses in CIDR but in none of Except.
type IPBlock struct {
	CIDR   netip.Prefix
	Except []netip.Prefix
}

// Contains says whether a is in the block.
func (b *IPBlock) Contains(a netip.Addr) bool {
	if !b.CIDR.Contains(a) {
		return false
	}
	for _, e := range b.Except {
		if e.Contains(a) {
			return false
		}
	}
	return true
}

// PolicyPort is one ports entry: a protocol and a port, a port range
// [Port, EndPort], a named port (resolved on the destination pod), or, Port
// 0 and no Name, every port of the protocol.
type PolicyPort struct {
	Proto   Proto
	Port    uint16
	EndPort uint16 // 0: Port alone
	Name    string
}
