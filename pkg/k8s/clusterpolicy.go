package k8s

import (
	"errors"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netcube/netcube/pkg/model"
)

// ClusterNetworkPolicies fail closed, as the API asks: a peer netcube
// cannot read makes an Accept rule match nothing and a Deny or Pass rule
// deny everything; an unknown action denies everything. A policy whose
// tier, priority or subject cannot be read is left out whole (nil) and is
// an error: netcube cannot know where it belongs or whom it selects.

// ToClusterPolicy converts a ClusterNetworkPolicy to what the policy cube
// enforces. err names every field left out or read as a Deny, by path.
func ToClusterPolicy(cnp *cnpv1.ClusterNetworkPolicy) (*model.ClusterPolicy, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	out := &model.ClusterPolicy{Name: cnp.Name, Priority: cnp.Spec.Priority}
	if cnp.Name == "" {
		bad("metadata.name is empty")
	}
	switch t := model.Tier(cnp.Spec.Tier); t {
	case model.AdminTier, model.BaselineTier:
		out.Tier = t
	default:
		bad("spec.tier: %q is neither Admin nor Baseline: the policy is not enforced", cnp.Spec.Tier)
		return nil, errors.Join(errs...)
	}
	if p := cnp.Spec.Priority; p < 0 || p > 1000 {
		bad("spec.priority: %d is not in 0-1000: the policy is not enforced", p)
		return nil, errors.Join(errs...)
	}
	if err := toSubject(out, cnp.Spec.Subject); err != nil {
		bad("spec.subject%v: the policy selects no pod", err)
		return nil, errors.Join(errs...)
	}
	for i, r := range cnp.Spec.Ingress {
		path := fmt.Sprintf("spec.ingress[%d]", i)
		peers := make([]cnpv1.ClusterNetworkPolicyEgressPeer, len(r.From))
		for j, p := range r.From {
			peers[j] = cnpv1.ClusterNetworkPolicyEgressPeer{Namespaces: p.Namespaces, Pods: p.Pods}
		}
		out.Ingress = append(out.Ingress, toClusterRule(path, "from", r.Name, r.Action, peers, r.Protocols, bad))
	}
	for i, r := range cnp.Spec.Egress {
		path := fmt.Sprintf("spec.egress[%d]", i)
		out.Egress = append(out.Egress, toClusterRule(path, "to", r.Name, r.Action, r.To, r.Protocols, bad))
	}
	return out, errors.Join(errs...)
}

// ReadClusterPolicy is ToClusterPolicy for the policy cube to decide
// what to enforce: never nil, with the object's resourceVersion, and what
// could not be read in Invalid (Unenforceable: nothing of it can be).
func ReadClusterPolicy(cnp *cnpv1.ClusterNetworkPolicy) *model.ClusterPolicy {
	p, err := ToClusterPolicy(cnp)
	if p == nil {
		p = UnreadClusterPolicy(cnp.Name, cnp.ResourceVersion, err)
	}
	p.ResourceVersion, p.Invalid = cnp.ResourceVersion, err
	return p
}

// UnreadClusterPolicy is a ClusterNetworkPolicy of which nothing could be
// read, for err.
func UnreadClusterPolicy(name, resourceVersion string, err error) *model.ClusterPolicy {
	return &model.ClusterPolicy{Name: name, ResourceVersion: resourceVersion, Invalid: err, Unenforceable: true}
}

func toSubject(out *model.ClusterPolicy, s cnpv1.ClusterNetworkPolicySubject) error {
	switch {
	case s.Namespaces != nil && s.Pods != nil:
		return fieldError("", "both namespaces and pods")
	case s.Namespaces != nil:
		sel, err := metav1.LabelSelectorAsSelector(s.Namespaces)
		if err != nil {
			return fieldError(".namespaces", "%v", err)
		}
		out.Namespaces, out.Pods = sel, labels.Everything()
	case s.Pods != nil:
		ns, err := metav1.LabelSelectorAsSelector(&s.Pods.NamespaceSelector)
		if err != nil {
			return fieldError(".pods.namespaceSelector", "%v", err)
		}
		pods, err := metav1.LabelSelectorAsSelector(&s.Pods.PodSelector)
		if err != nil {
			return fieldError(".pods.podSelector", "%v", err)
		}
		out.Namespaces, out.Pods = ns, pods
	default:
		return fieldError("", "neither namespaces nor pods")
	}
	return nil
}

// toClusterRule converts one rule (ingress peers come as egress peers with
// only the fields ingress has).
func toClusterRule(path, peersField, name string, action cnpv1.ClusterNetworkPolicyRuleAction,
	peers []cnpv1.ClusterNetworkPolicyEgressPeer, protocols []cnpv1.ClusterNetworkPolicyProtocol, bad func(string, ...any)) model.ClusterRule {
	rule := model.ClusterRule{Name: name, Action: model.RuleAction(action)}
	denyAll := func(why string) model.ClusterRule {
		bad("%s%s: the rule denies every peer on every port", path, why)
		return model.ClusterRule{Name: name, Action: model.Deny, Everyone: true}
	}
	switch rule.Action {
	case model.Accept, model.Deny, model.Pass:
	default:
		return denyAll(fmt.Sprintf(".action %q is not Accept, Deny or Pass", action))
	}
	if len(peers) == 0 {
		return denyAll(fmt.Sprintf(".%s is empty", peersField))
	}
	for j, p := range peers {
		at := fmt.Sprintf("%s.%s[%d]", path, peersField, j)
		if err := addClusterPeer(&rule, p); err != nil {
			if rule.Action != model.Accept {
				return denyAll(fmt.Sprintf("%s%v", at[len(path):], err))
			}
			bad("%s%v: the rule does not accept this peer", at, err)
		}
	}
	for j, p := range protocols {
		port, err := toClusterPort(p)
		if err == nil {
			rule.Ports = append(rule.Ports, port)
			continue
		}
		if rule.Action != model.Accept {
			return denyAll(fmt.Sprintf(".protocols[%d]%v", j, err))
		}
		bad("%s.protocols[%d]%v: the rule does not accept this port", path, j, err)
	}
	if rule.Action == model.Accept && (len(rule.Peers) == 0 && len(rule.Nodes) == 0 || len(protocols) > 0 && len(rule.Ports) == 0) {
		bad("%s: nothing of it is valid, the rule accepts nothing", path)
		rule.Peers, rule.Nodes, rule.Ports = nil, nil, nil // no peer: it matches nothing
	}
	return rule
}

// addClusterPeer adds p to rule: exactly one of its fields must be set.
func addClusterPeer(rule *model.ClusterRule, p cnpv1.ClusterNetworkPolicyEgressPeer) error {
	set := 0
	for _, ok := range []bool{p.Namespaces != nil, p.Pods != nil, p.Nodes != nil, len(p.Networks) > 0, len(p.DomainNames) > 0} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return fieldError("", "%d of namespaces, pods, nodes, networks and domainNames set, want exactly one (a field of another API version?)", set)
	}
	switch {
	case p.Namespaces != nil:
		sel, err := metav1.LabelSelectorAsSelector(p.Namespaces)
		if err != nil {
			return fieldError(".namespaces", "%v", err)
		}
		rule.Peers = append(rule.Peers, model.PolicyPeer{Namespaces: sel, Pods: labels.Everything()})
	case p.Pods != nil:
		ns, err := metav1.LabelSelectorAsSelector(&p.Pods.NamespaceSelector)
		if err != nil {
			return fieldError(".pods.namespaceSelector", "%v", err)
		}
		pods, err := metav1.LabelSelectorAsSelector(&p.Pods.PodSelector)
		if err != nil {
			return fieldError(".pods.podSelector", "%v", err)
		}
		rule.Peers = append(rule.Peers, model.PolicyPeer{Namespaces: ns, Pods: pods})
	case p.Nodes != nil:
		sel, err := metav1.LabelSelectorAsSelector(p.Nodes)
		if err != nil {
			return fieldError(".nodes", "%v", err)
		}
		rule.Nodes = append(rule.Nodes, sel)
	case len(p.Networks) > 0:
		var blocks []model.PolicyPeer
		for k, n := range p.Networks {
			cidr, err := netip.ParsePrefix(string(n))
			if err == nil {
				cidr, err = unmapPrefix(cidr)
			}
			if err != nil {
				return fieldError(fmt.Sprintf(".networks[%d]", k), "%q is not a CIDR: %v", n, err)
			}
			blocks = append(blocks, model.PolicyPeer{Block: &model.IPBlock{CIDR: cidr.Masked()}})
		}
		rule.Peers = append(rule.Peers, blocks...)
	default:
		return fieldError(".domainNames", "not supported by netcube")
	}
	return nil
}

// toClusterPort converts one protocols entry: exactly one field set.
func toClusterPort(p cnpv1.ClusterNetworkPolicyProtocol) (model.PolicyPort, error) {
	var out model.PolicyPort
	var dst *cnpv1.Port
	field := ""
	set := 0
	if p.TCP != nil {
		out.Proto, dst, field = model.TCP, p.TCP.DestinationPort, ".tcp"
		set++
	}
	if p.UDP != nil {
		out.Proto, dst, field = model.UDP, p.UDP.DestinationPort, ".udp"
		set++
	}
	if p.SCTP != nil {
		out.Proto, dst, field = model.SCTP, p.SCTP.DestinationPort, ".sctp"
		set++
	}
	if p.DestinationNamedPort != "" {
		out.Name = p.DestinationNamedPort // of any protocol: the container port's own
		set++
	}
	if set != 1 {
		return out, fieldError("", "%d of tcp, udp, sctp and destinationNamedPort set, want exactly one", set)
	}
	switch {
	case out.Name != "" || dst == nil:
	case dst.Range != nil:
		if dst.Number != 0 {
			return out, fieldError(field+".destinationPort", "both number and range")
		}
		if dst.Range.Start < 1 || dst.Range.End < dst.Range.Start || dst.Range.End > 65535 {
			return out, fieldError(field+".destinationPort.range", "%d-%d is not a range in 1-65535", dst.Range.Start, dst.Range.End)
		}
		out.Port, out.EndPort = uint16(dst.Range.Start), uint16(dst.Range.End)
	default:
		if dst.Number < 1 || dst.Number > 65535 {
			return out, fieldError(field+".destinationPort.number", "%d is not in 1-65535", dst.Number)
		}
		out.Port = uint16(dst.Number)
	}
	return out, nil
}
