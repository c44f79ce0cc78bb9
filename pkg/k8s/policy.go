package k8s

import (
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/pkg/model"
)

// NetworkPolicies fail closed. ToPolicy keeps what a policy isolates (its
// podSelector and policyTypes) whatever else is wrong with it, and leaves
// out only what is invalid: a peer or a port it cannot read grants nothing.
// A rule whose every peer (or every port) is invalid is left out whole,
// since an empty list would mean "every peer" (port). A policy whose
// podSelector is invalid selects nothing and is an error: netcube cannot
// know which pods the author meant to isolate.

// ToPolicy converts a NetworkPolicy to what the policy cube enforces. err
// names every field left out, each by its path.
func ToPolicy(np *networkingv1.NetworkPolicy) (*model.Policy, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	out := &model.Policy{ID: model.PolicyID{Namespace: np.Namespace, Name: np.Name}}
	if np.Name == "" {
		bad("metadata.name is empty")
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		bad("spec.podSelector: %v: the policy selects no pod", err)
		return nil, errors.Join(errs...)
	}
	out.Pods = sel

	// policyTypes: unset means Ingress, plus Egress when egress rules exist.
	if len(np.Spec.PolicyTypes) == 0 {
		out.IsolatesIngress = true
		out.IsolatesEgress = len(np.Spec.Egress) > 0
	}
	for i, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			out.IsolatesIngress = true
		case networkingv1.PolicyTypeEgress:
			out.IsolatesEgress = true
		default:
			bad("spec.policyTypes[%d]: %q is neither Ingress nor Egress", i, t)
		}
	}
	for i, r := range np.Spec.Ingress {
		path := fmt.Sprintf("spec.ingress[%d]", i)
		if rule, ok := toRule(path, "from", r.From, r.Ports, bad); ok {
			out.Ingress = append(out.Ingress, rule)
		}
	}
	for i, r := range np.Spec.Egress {
		path := fmt.Sprintf("spec.egress[%d]", i)
		if rule, ok := toRule(path, "to", r.To, r.Ports, bad); ok {
			out.Egress = append(out.Egress, rule)
		}
	}
	return out, errors.Join(errs...)
}

// toRule converts one rule; false when it must be left out (all its peers
// or all its ports invalid).
func toRule(path, peersField string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort,
	bad func(string, ...any)) (model.PolicyRule, bool) {
	var rule model.PolicyRule
	for j, p := range peers {
		if peer, err := toPeer(p); err != nil {
			bad("%s.%s[%d]%s: the rule does not allow this peer", path, peersField, j, err)
		} else {
			rule.Peers = append(rule.Peers, peer)
		}
	}
	for j, p := range ports {
		if port, err := toPolicyPort(p); err != nil {
			bad("%s.ports[%d]%s: the rule does not allow this port", path, j, err)
		} else {
			rule.Ports = append(rule.Ports, port)
		}
	}
	if len(peers) > 0 && len(rule.Peers) == 0 || len(ports) > 0 && len(rule.Ports) == 0 {
		bad("%s: nothing of it is valid, the rule allows nothing", path)
		return rule, false
	}
	return rule, true
}

// fieldError is an error whose message starts with the field's path below
// the element being converted (".ipBlock.cidr: ...").
func fieldError(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
}

func toPeer(p networkingv1.NetworkPolicyPeer) (model.PolicyPeer, error) {
	var peer model.PolicyPeer
	if p.IPBlock != nil {
		if p.PodSelector != nil || p.NamespaceSelector != nil {
			return peer, fieldError("", "ipBlock together with a selector")
		}
		cidr, err := netip.ParsePrefix(p.IPBlock.CIDR)
		if err != nil {
			return peer, fieldError(".ipBlock.cidr", "%q is not a CIDR", p.IPBlock.CIDR)
		}
		if cidr, err = unmapPrefix(cidr); err != nil {
			return peer, fieldError(".ipBlock.cidr", "%v", err)
		}
		block := &model.IPBlock{CIDR: cidr}
		for k, e := range p.IPBlock.Except {
			ex, err := netip.ParsePrefix(e)
			if err == nil {
				ex, err = unmapPrefix(ex)
			}
			switch {
			case err != nil:
				return peer, fieldError(fmt.Sprintf(".ipBlock.except[%d]", k), "%q is not a CIDR: %v", e, err)
			case ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()):
				return peer, fieldError(fmt.Sprintf(".ipBlock.except[%d]", k), "%s is not strictly inside cidr %s", e, cidr)
			}
			block.Except = append(block.Except, ex)
		}
		peer.Block = block
		return peer, nil
	}
	if p.PodSelector == nil && p.NamespaceSelector == nil {
		return peer, fieldError("", "neither podSelector, namespaceSelector nor ipBlock")
	}
	if p.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.PodSelector)
		if err != nil {
			return peer, fieldError(".podSelector", "%v", err)
		}
		peer.Pods = sel
	}
	if p.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
		if err != nil {
			return peer, fieldError(".namespaceSelector", "%v", err)
		}
		peer.Namespaces = sel
	}
	if peer.Pods == nil {
		peer.Pods = labels.Everything() // namespaceSelector alone: every pod there
	}
	return peer, nil
}

func toPolicyPort(p networkingv1.NetworkPolicyPort) (model.PolicyPort, error) {
	var out model.PolicyPort
	proto, ok := policyProtocol(p.Protocol)
	if !ok {
		return out, fieldError(".protocol", "%q is not TCP, UDP or SCTP", *p.Protocol)
	}
	out.Proto = proto
	switch {
	case p.Port == nil:
		if p.EndPort != nil {
			return out, fieldError(".endPort", "given without a port")
		}
	case p.Port.Type == intstr.String:
		if p.Port.StrVal == "" {
			return out, fieldError(".port", "empty port name")
		}
		if p.EndPort != nil {
			return out, fieldError(".endPort", "given with the named port %q", p.Port.StrVal)
		}
		out.Name = p.Port.StrVal
	default:
		if p.Port.IntVal < 1 || p.Port.IntVal > 65535 {
			return out, fieldError(".port", "%d is not in 1-65535", p.Port.IntVal)
		}
		out.Port = uint16(p.Port.IntVal)
		if p.EndPort != nil {
			if *p.EndPort < p.Port.IntVal || *p.EndPort > 65535 {
				return out, fieldError(".endPort", "%d is not in %d-65535", *p.EndPort, p.Port.IntVal)
			}
			out.EndPort = uint16(*p.EndPort)
		}
	}
	return out, nil
}

func policyProtocol(p *corev1.Protocol) (model.Proto, bool) {
	if p == nil {
		return model.TCP, true
	}
	switch *p {
	case corev1.ProtocolTCP:
		return model.TCP, true
	case corev1.ProtocolUDP:
		return model.UDP, true
	case corev1.ProtocolSCTP:
		return model.SCTP, true
	}
	return 0, false
}

// ToPod converts what the policy cube reads of a pod: nil for a pod that
// has finished (Succeeded or Failed: its address may be another's now).
// A pod with no address yet is kept, with none: its labels are what its
// node's agent writes its policy from before its CNI ADD returns (the
// runtime reports the address only after). err names what was left out.
func ToPod(pod *corev1.Pod) (*model.Pod, error) {
	if pod.Name == "" {
		return nil, errors.New("metadata.name is empty: the pod is not used")
	}
	var errs []error
	out := &model.Pod{
		ID:          model.PodID{Namespace: pod.Namespace, Name: pod.Name},
		Labels:      pod.Labels,
		Node:        pod.Spec.NodeName,
		HostNetwork: pod.Spec.HostNetwork,
	}
	ips := pod.Status.PodIPs
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: pod.Status.PodIP}}
	}
	for i, ip := range ips {
		a, err := netip.ParseAddr(ip.IP)
		if err != nil {
			errs = append(errs, fmt.Errorf("status.podIPs[%d]: %q is not an IP address", i, ip.IP))
			continue
		}
		out.IPs = append(out.IPs, a.Unmap())
	}
	for i, c := range pod.Spec.Containers {
		for j, p := range c.Ports {
			if p.Name == "" {
				continue
			}
			proto, ok := model.TCP, true
			if p.Protocol != "" {
				proto, ok = policyProtocol(&p.Protocol)
			}
			if !ok || p.ContainerPort < 1 || p.ContainerPort > 65535 {
				errs = append(errs, fmt.Errorf("spec.containers[%d].ports[%d]: %s/%d is not a valid port", i, j, p.Protocol, p.ContainerPort))
				continue
			}
			out.Ports = append(out.Ports, model.NamedPort{Name: p.Name, Port: uint16(p.ContainerPort), Proto: proto})
		}
	}
	for _, a := range []struct {
		name string
		to   *uint64
	}{{EgressBandwidthAnnotation, &out.EgressBandwidth}, {IngressBandwidthAnnotation, &out.IngressBandwidth}} {
		if v, ok := pod.Annotations[a.name]; ok {
			bw, err := ParseBandwidth(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("metadata.annotations[%s]: %w (no rate applied)", a.name, err))
			}
			*a.to = bw
		}
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil, errors.Join(errs...)
	}
	return out, errors.Join(errs...)
}

// ToNamespace converts a namespace: its name and labels.
func ToNamespace(ns *corev1.Namespace) *model.Namespace {
	return &model.Namespace{Name: ns.Name, Labels: ns.Labels}
}
