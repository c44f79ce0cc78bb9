package model

import (
	"k8s.io/apimachinery/pkg/labels"
)

// Tier is a ClusterNetworkPolicy's tier: Admin rules are evaluated before
// NetworkPolicy, Baseline rules after it, for the pods no NetworkPolicy
// isolates in that direction.
type Tier string

const (
	AdminTier    Tier = "Admin"
	BaselineTier Tier = "Baseline"
)

// RuleAction is what a ClusterNetworkPolicy rule does with the traffic it
// matches.
type RuleAction string

const (
	// Accept allows the connection (and its replies); nothing later is
	// evaluated in that direction.
	Accept RuleAction = "Accept"
	// Deny drops it; nothing later is evaluated.
	Deny RuleAction = "Deny"
	// Pass skips the rest of the tier: the next tier decides.
	Pass RuleAction = "Pass"
)

// ClusterPolicy is a ClusterNetworkPolicy
// (policy.networking.k8s.io/v1beta1): cluster-scoped rules, in a tier,
// ordered by Priority (lower first) and within it by position.
type ClusterPolicy struct {
	Name     string
	Tier     Tier
	Priority int32
	// The subject: the pods Pods selects in the namespaces Namespaces
	// selects (Pods nil: every pod there). Host-network pods never.
	Namespaces, Pods labels.Selector
	Ingress, Egress  []ClusterRule
	// ResourceVersion is the API object's version this was read from.
	ResourceVersion string
	// Invalid is what of the object could not be read (nil: all of it).
	// The rest is then its fail-closed reading or, Unenforceable, none
	// (its tier, priority or subject could not be read): the policy cube
	// keeps enforcing the last version read whole, if it has one.
	Invalid       error
	Unenforceable bool
}

// ClusterRule is one rule: its Action for traffic with any of Peers on any
// of Ports (none: every protocol and port).
type ClusterRule struct {
	Name   string
	Action RuleAction
	// Peers are pods by selectors (PolicyPeer's Namespaces always set) or
	// networks (a Block without excepts).
	Peers []PolicyPeer
	// Nodes select nodes by their labels: the peer is their addresses
	// (egress only).
	Nodes []labels.Selector
	// Everyone: the rule matches every peer (a Deny or Pass rule with a
	// peer netcube cannot read fails closed as a Deny of everything).
	Everyone bool
	Ports    []PolicyPort
}

// ClusterPolicyRef names a ClusterNetworkPolicy in the policy names a
// verdict event carries (cube.PolicyNamer), beside NetworkPolicies'
// namespace/name: the kind, the tier and the name.
func ClusterPolicyRef(tier Tier, name string) string {
	return "ClusterNetworkPolicy:" + string(tier) + ":" + name
}
