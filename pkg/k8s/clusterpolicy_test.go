package k8s

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netcube/netcube/pkg/model"
)

func cnp(spec cnpv1.ClusterNetworkPolicySpec) *cnpv1.ClusterNetworkPolicy {
	return &cnpv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: spec}
}

var allNamespaces = cnpv1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}

// TestToClusterPolicy: a valid policy converts whole; what cannot be read
// fails closed as the API asks (an Accept's bad peer matches nothing, a
// Deny's or Pass's denies everything), each named by its field; a policy
// without a tier, priority or subject netcube can read is not enforced.
func TestToClusterPolicy(t *testing.T) {
	tcp80 := cnpv1.ClusterNetworkPolicyProtocol{TCP: &cnpv1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1.Port{Number: 80}}}
	udpRange := cnpv1.ClusterNetworkPolicyProtocol{UDP: &cnpv1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnpv1.Port{Range: &cnpv1.PortRange{Start: 5000, End: 6000}}}}
	p, err := ToClusterPolicy(cnp(cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 3, Subject: allNamespaces,
		Ingress: []cnpv1.ClusterNetworkPolicyIngressRule{{Name: "in", Action: cnpv1.ClusterNetworkPolicyRuleActionDeny,
			From:      []cnpv1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}},
			Protocols: []cnpv1.ClusterNetworkPolicyProtocol{tcp80, udpRange, {DestinationNamedPort: "web"}}}},
		Egress: []cnpv1.ClusterNetworkPolicyEgressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionAccept,
			To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1.CIDR{"192.0.2.0/24", "2001:db8::/32"}}}}}}))
	if err != nil || p == nil {
		t.Fatalf("a valid policy: %v", err) // the positive control
	}
	if p.Tier != model.AdminTier || p.Priority != 3 || len(p.Ingress) != 1 || len(p.Egress) != 1 {
		t.Fatalf("converted: %+v", p)
	}
	in := p.Ingress[0]
	if in.Action != model.Deny || in.Everyone || len(in.Peers) != 1 || len(in.Ports) != 3 ||
		in.Ports[1] != (model.PolicyPort{Proto: model.UDP, Port: 5000, EndPort: 6000}) || in.Ports[2].Name != "web" {
		t.Errorf("ingress rule: %+v", in)
	}
	if eg := p.Egress[0]; len(eg.Peers) != 2 || eg.Peers[0].Block == nil || eg.Peers[1].Block.CIDR.String() != "2001:db8::/32" {
		t.Errorf("egress networks: %+v", eg)
	}

	for _, c := range []struct {
		name    string
		spec    cnpv1.ClusterNetworkPolicySpec
		whole   bool // not enforced at all
		field   string
		check   func(*model.ClusterPolicy) bool
		wantMsg string
	}{
		{name: "bad tier", spec: cnpv1.ClusterNetworkPolicySpec{Tier: "Middle", Subject: allNamespaces}, whole: true, field: "spec.tier"},
		{name: "bad priority", spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 1001, Subject: allNamespaces}, whole: true, field: "spec.priority"},
		{name: "no subject", spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier}, whole: true, field: "spec.subject"},
		{name: "deny with an unknown peer", field: "spec.egress[0].to[0]", spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.BaselineTier, Subject: allNamespaces,
			Egress: []cnpv1.ClusterNetworkPolicyEgressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{}}}}},
			check: func(p *model.ClusterPolicy) bool {
				return p.Egress[0].Everyone && p.Egress[0].Action == model.Deny && len(p.Egress[0].Ports) == 0
			}},
		{name: "pass with a domain name", field: "domainNames", spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Subject: allNamespaces,
			Egress: []cnpv1.ClusterNetworkPolicyEgressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionPass, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnpv1.DomainName{"example.com"}}}}}},
			check: func(p *model.ClusterPolicy) bool { return p.Egress[0].Everyone && p.Egress[0].Action == model.Deny }},
		{name: "accept with a bad network", field: "spec.egress[0].to[0].networks[0]", spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Subject: allNamespaces,
			Egress: []cnpv1.ClusterNetworkPolicyEgressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionAccept, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1.CIDR{"300.0.0.0/8"}}}}}},
			check: func(p *model.ClusterPolicy) bool { return !p.Egress[0].Everyone && len(p.Egress[0].Peers) == 0 }},
		{name: "unknown action", field: "spec.ingress[0].action", spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Subject: allNamespaces,
			Ingress: []cnpv1.ClusterNetworkPolicyIngressRule{{Action: "Allow", From: []cnpv1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}},
			check: func(p *model.ClusterPolicy) bool { return p.Ingress[0].Everyone && p.Ingress[0].Action == model.Deny }},
		{name: "deny with a bad port", field: "spec.ingress[0].protocols[0]", spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Subject: allNamespaces,
			Ingress: []cnpv1.ClusterNetworkPolicyIngressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny, From: []cnpv1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}},
				Protocols: []cnpv1.ClusterNetworkPolicyProtocol{{TCP: &cnpv1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1.Port{Number: 70000}}}}}}},
			check: func(p *model.ClusterPolicy) bool { return p.Ingress[0].Everyone && len(p.Ingress[0].Ports) == 0 }},
	} {
		p, err := ToClusterPolicy(cnp(c.spec))
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.field)
		}
		if c.whole != (p == nil) {
			t.Errorf("%s: policy %+v, want enforced: %v", c.name, p, !c.whole)
		}
		if p != nil && c.check != nil && !c.check(p) {
			t.Errorf("%s: converted as %+v: not failed closed as the API asks", c.name, p)
		}
	}
}

// TestReadClusterPolicy: what the kube source hands the policy cube is
// never nil: the resourceVersion, and what could not be read in Invalid
// (Unenforceable when the subject cannot be read either).
func TestReadClusterPolicy(t *testing.T) {
	good := cnp(cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 3, Subject: allNamespaces})
	good.ResourceVersion = "7"
	if p := ReadClusterPolicy(good); p.ResourceVersion != "7" || p.Invalid != nil || p.Unenforceable {
		t.Errorf("good: %+v", p)
	}
	badPeer := good.DeepCopy()
	badPeer.Spec.Egress = []cnpv1.ClusterNetworkPolicyEgressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny,
		To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1.CIDR{"10.0.0.0/33"}}}}}
	if p := ReadClusterPolicy(badPeer); p.Invalid == nil || !strings.Contains(p.Invalid.Error(), "spec.egress[0].to[0].networks[0]") ||
		p.Unenforceable || len(p.Egress) != 1 || !p.Egress[0].Everyone {
		t.Errorf("a bad Deny peer: %+v (want Invalid naming the field, the rule denying everyone)", p)
	}
	badSubject := good.DeepCopy()
	badSubject.Spec.Subject = cnpv1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn}}}}
	if p := ReadClusterPolicy(badSubject); p.Invalid == nil || !p.Unenforceable || p.Name != "p" || p.ResourceVersion != "7" {
		t.Errorf("a bad subject: %+v", p)
	}
}
