package k8s

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/internal/apiobj"
	"github.com/netcube/netcube/pkg/model"
)

// validPolicy uses every field of a NetworkPolicy: one ingress rule with a
// pod peer, a namespace peer, an IP block, and a numbered, ranged and
// named port.
func validPolicy() *networkingv1.NetworkPolicy {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}},
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ops"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
				},
				Ports: []networkingv1.NetworkPolicyPort{
					{Protocol: &tcp, Port: apiobj.Ptr(intstr.FromInt32(80))},
					{Protocol: &udp, Port: apiobj.Ptr(intstr.FromInt32(5000)), EndPort: apiobj.Ptr[int32](5010)},
					{Port: apiobj.Ptr(intstr.FromString("metrics"))},
				},
			}},
		},
	}
}

func TestPolicyConverted(t *testing.T) {
	p, err := ToPolicy(validPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if !p.IsolatesIngress || p.IsolatesEgress {
		t.Errorf("isolates ingress %v egress %v; want ingress only (no policyTypes, no egress rules)", p.IsolatesIngress, p.IsolatesEgress)
	}
	r := p.Ingress[0]
	if len(r.Peers) != 3 || r.Peers[0].Namespaces != nil || r.Peers[1].Pods == nil || r.Peers[2].Block == nil {
		t.Errorf("peers %+v", r.Peers)
	}
	want := []model.PolicyPort{{Proto: model.TCP, Port: 80}, {Proto: model.UDP, Port: 5000, EndPort: 5010}, {Proto: model.TCP, Name: "metrics"}}
	for i, w := range want {
		if r.Ports[i] != w {
			t.Errorf("port %d: %+v, want %+v", i, r.Ports[i], w)
		}
	}
	egress := validPolicy()
	egress.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	if p, _ := ToPolicy(egress); !p.IsolatesEgress {
		t.Error("egress rules without policyTypes: Egress is implied")
	}
}

// TestPolicyFieldsValidated: an invalid field is named by its path and
// value and grants nothing; the policy still isolates its pods; a rule
// left with no valid peer or port is dropped whole (an empty list would
// allow everything).
func TestPolicyFieldsValidated(t *testing.T) {
	sctp, bogus := corev1.ProtocolSCTP, corev1.Protocol("ICMP")
	cases := []struct {
		name  string
		edit  func(*networkingv1.NetworkPolicy)
		error string
		check func(*testing.T, *model.Policy)
	}{
		{"invalid CIDR", func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress[0].From[2].IPBlock.CIDR = "10.0.0.0/33" },
			`spec.ingress[0].from[2].ipBlock.cidr: "10.0.0.0/33" is not a CIDR`,
			func(t *testing.T, p *model.Policy) {
				if len(p.Ingress) != 1 || len(p.Ingress[0].Peers) != 2 {
					t.Errorf("want the rule kept with its 2 valid peers: %+v", p.Ingress)
				}
			}},
		{"except outside cidr", func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress[0].From[2].IPBlock.Except = []string{"192.168.0.0/16"}
		}, "spec.ingress[0].from[2].ipBlock.except[0]: 192.168.0.0/16 is not strictly inside cidr 10.0.0.0/8", nil},
		{"unknown protocol", func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress[0].Ports[0].Protocol = &bogus },
			`spec.ingress[0].ports[0].protocol: "ICMP" is not TCP, UDP or SCTP`,
			func(t *testing.T, p *model.Policy) {
				if len(p.Ingress[0].Ports) != 2 {
					t.Errorf("want the 2 valid ports kept: %+v", p.Ingress[0].Ports)
				}
			}},
		{"endPort below port", func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress[0].Ports[1].EndPort = apiobj.Ptr[int32](4000) },
			"spec.ingress[0].ports[1].endPort: 4000 is not in 5000-65535", nil},
		{"every peer invalid: the rule allows nothing", func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "nope"}}}
		}, "spec.ingress[0]: nothing of it is valid, the rule allows nothing",
			func(t *testing.T, p *model.Policy) {
				if len(p.Ingress) != 0 || !p.IsolatesIngress {
					t.Errorf("want the rule dropped and the pods still isolated: %+v", p)
				}
			}},
		{"every port invalid: the rule allows nothing", func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{{Protocol: &sctp, Port: apiobj.Ptr(intstr.FromInt32(0))}}
		}, "spec.ingress[0].ports[0].port: 0 is not in 1-65535", func(t *testing.T, p *model.Policy) {
			if len(p.Ingress) != 0 {
				t.Errorf("want the rule dropped: %+v", p.Ingress)
			}
		}},
		{"invalid podSelector: selects nothing", func(p *networkingv1.NetworkPolicy) {
			p.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}
		}, "spec.podSelector:", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			np := validPolicy()
			c.edit(np)
			p, err := ToPolicy(np)
			if err == nil || !strings.Contains(err.Error(), c.error) {
				t.Fatalf("error %v, want one containing %q", err, c.error)
			}
			if c.check != nil {
				c.check(t, p)
			}
		})
	}
}

func TestPodConverted(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080}, {ContainerPort: 9000}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}, {IP: "fd00:10:244:1::5"}}},
	}
	p, err := ToPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.IPs) != 2 || len(p.Ports) != 2 || p.Ports[1] != (model.NamedPort{Name: "dns", Port: 53, Proto: model.UDP}) {
		t.Errorf("pod %+v", p)
	}
	pod.Status.PodIPs = nil
	if p, err := ToPod(pod); err != nil || p == nil || len(p.IPs) != 0 || p.Labels["app"] != "web" || p.Node != "node1" {
		t.Errorf("a pod without an address yet: %+v, %v; want it with its labels and node, and no address", p, err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if p, _ := ToPod(pod); p != nil {
		t.Errorf("a pod that has finished: %+v, want nil", p)
	}
}
