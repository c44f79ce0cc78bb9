package bench

import (
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/k8s"
)

// The ClusterNetworkPolicies the benchmarks write, as API objects: the
// per-packet benchmark converts them as the agent does (k8s.ToClusterPolicy),
// the change-latency benchmark creates them in the API server.

// nsNameLabel is the label the API server gives every namespace.
const nsNameLabel = "kubernetes.io/metadata.name"

func cnpTCP(port int) cnpv1.ClusterNetworkPolicyProtocol {
	return cnpv1.ClusterNetworkPolicyProtocol{TCP: &cnpv1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1.Port{Number: int32(port)}}}
}

func cnpTCPRange(lo, hi int) cnpv1.ClusterNetworkPolicyProtocol {
	return cnpv1.ClusterNetworkPolicyProtocol{TCP: &cnpv1.ClusterNetworkPolicyProtocolTCP{
		DestinationPort: &cnpv1.Port{Range: &cnpv1.PortRange{Start: int32(lo), End: int32(hi)}}}}
}

func cnpUDP(port int) cnpv1.ClusterNetworkPolicyProtocol {
	return cnpv1.ClusterNetworkPolicyProtocol{UDP: &cnpv1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnpv1.Port{Number: int32(port)}}}
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// cnpPods is a peer (or subject) of the pods pods selects in the
// namespaces ns selects.
func cnpPods(ns, pods *metav1.LabelSelector) *cnpv1.NamespacedPod {
	return &cnpv1.NamespacedPod{NamespaceSelector: *ns, PodSelector: *pods}
}

func cnpIn(action cnpv1.ClusterNetworkPolicyRuleAction, name string, from cnpv1.ClusterNetworkPolicyIngressPeer, ports ...cnpv1.ClusterNetworkPolicyProtocol) cnpv1.ClusterNetworkPolicyIngressRule {
	return cnpv1.ClusterNetworkPolicyIngressRule{Name: name, Action: action, From: []cnpv1.ClusterNetworkPolicyIngressPeer{from}, Protocols: ports}
}

func cnpOut(action cnpv1.ClusterNetworkPolicyRuleAction, name string, to cnpv1.ClusterNetworkPolicyEgressPeer, ports ...cnpv1.ClusterNetworkPolicyProtocol) cnpv1.ClusterNetworkPolicyEgressRule {
	return cnpv1.ClusterNetworkPolicyEgressRule{Name: name, Action: action, To: []cnpv1.ClusterNetworkPolicyEgressPeer{to}, Protocols: ports}
}

func newCNP(name string, tier cnpv1.Tier, priority int, subject cnpv1.ClusterNetworkPolicySubject) *cnpv1.ClusterNetworkPolicy {
	return &cnpv1.ClusterNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: cnpv1.SchemeGroupVersion.String(), Kind: "ClusterNetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       cnpv1.ClusterNetworkPolicySpec{Tier: tier, Priority: int32(priority), Subject: subject}}
}

var cnpActions = [...]cnpv1.ClusterNetworkPolicyRuleAction{cnpv1.ClusterNetworkPolicyRuleActionDeny,
	cnpv1.ClusterNetworkPolicyRuleActionAccept, cnpv1.ClusterNetworkPolicyRuleActionPass}

// benchClusterPolicies are the per-packet benchmark's perTier Admin and
// perTier Baseline ClusterNetworkPolicies. Every one selects the
// benchmark's client and servers (namespace bench: the whole namespace,
// or its pods role in (client, server)), and their rules are what a
// cluster's are, most of them about other traffic: Deny, Accept and Pass
// rules with policy.ScaleCluster's namespaces and apps as peers (its
// team labels) on ports of their own, TCP, TCP ranges and UDP, one in ten
// egress rules to a network; one Admin policy in seven denies the
// benchmark's own pods the ports just above the measured one (7001-7100,
// a near miss). The measured connection (client -> servers on
// podnetRRPort) is decided by the tiers: the middle Admin policy passes
// it to NetworkPolicy, in both directions, after every Admin rule before
// it was looked at, and NetworkPolicy's rules allow it; the last Baseline
// policy denies every pod's ingress (the client's, which no NetworkPolicy
// isolates: namespaces isolated unless they opt in).
func benchClusterPolicies(perTier int) []*cnpv1.ClusterNetworkPolicy {
	bench := matchLabels(nsNameLabel, "bench")
	ends := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "role", Operator: metav1.LabelSelectorOpIn, Values: []string{"client", "server"}}}}
	subject := func(k int) cnpv1.ClusterNetworkPolicySubject {
		if k%2 == 0 {
			return cnpv1.ClusterNetworkPolicySubject{Namespaces: bench}
		}
		return cnpv1.ClusterNetworkPolicySubject{Pods: cnpPods(bench, ends)}
	}
	team := func(k int) *metav1.LabelSelector { return matchLabels("team", fmt.Sprintf("t%d", k%3)) }
	app := func(k int) *metav1.LabelSelector { return matchLabels("app", fmt.Sprintf("a%d", k%5)) }
	var out []*cnpv1.ClusterNetworkPolicy
	for k := range perTier {
		p := newCNP(fmt.Sprintf("admin-%04d", k), cnpv1.AdminTier, 100+k, subject(k))
		if k == perTier/2 {
			p.Spec.Ingress = append(p.Spec.Ingress, cnpIn(cnpv1.ClusterNetworkPolicyRuleActionPass, "bench-client-to-namespace-owner",
				cnpv1.ClusterNetworkPolicyIngressPeer{Pods: cnpPods(bench, matchLabels("role", "client"))}, cnpTCP(podnetRRPort)))
			p.Spec.Egress = append(p.Spec.Egress, cnpOut(cnpv1.ClusterNetworkPolicyRuleActionPass, "bench-servers-to-namespace-owner",
				cnpv1.ClusterNetworkPolicyEgressPeer{Pods: cnpPods(bench, matchLabels("role", "server"))}, cnpTCP(podnetRRPort)))
		}
		var port cnpv1.ClusterNetworkPolicyProtocol
		switch k % 3 {
		case 0:
			port = cnpTCP(2000 + k)
		case 1:
			port = cnpTCPRange(2000+k, 2010+k)
		default:
			port = cnpUDP(2000 + k)
		}
		p.Spec.Ingress = append(p.Spec.Ingress, cnpIn(cnpActions[k%3], "from-apps",
			cnpv1.ClusterNetworkPolicyIngressPeer{Pods: cnpPods(team(k), app(k))}, port))
		to := cnpv1.ClusterNetworkPolicyEgressPeer{Pods: cnpPods(team(k+1), app(k+2))}
		if k%10 == 0 {
			to = cnpv1.ClusterNetworkPolicyEgressPeer{Networks: []cnpv1.CIDR{cnpv1.CIDR(fmt.Sprintf("192.168.%d.0/24", k%256))}}
		}
		p.Spec.Egress = append(p.Spec.Egress, cnpOut(cnpActions[(k+1)%3], "to-apps", to, cnpTCP(3000+k)))
		if k%7 == 3 {
			p.Spec.Ingress = append(p.Spec.Ingress, cnpIn(cnpv1.ClusterNetworkPolicyRuleActionDeny, "near-miss",
				cnpv1.ClusterNetworkPolicyIngressPeer{Pods: cnpPods(bench, matchLabels("role", "client"))}, cnpTCPRange(podnetRRPort+1, podnetRRPort+100)))
			p.Spec.Egress = append(p.Spec.Egress, cnpOut(cnpv1.ClusterNetworkPolicyRuleActionDeny, "near-miss",
				cnpv1.ClusterNetworkPolicyEgressPeer{Pods: cnpPods(bench, matchLabels("role", "server"))}, cnpTCPRange(podnetRRPort+1, podnetRRPort+100)))
		}
		out = append(out, p)
	}
	for k := range perTier {
		p := newCNP(fmt.Sprintf("baseline-%04d", k), cnpv1.BaselineTier, k, subject(k))
		p.Spec.Ingress = append(p.Spec.Ingress, cnpIn(cnpv1.ClusterNetworkPolicyRuleActionDeny, "from-teams",
			cnpv1.ClusterNetworkPolicyIngressPeer{Namespaces: team(k)}, cnpTCP(4000+k)))
		to := cnpv1.ClusterNetworkPolicyEgressPeer{Pods: cnpPods(team(k), app(k+1))}
		action := cnpv1.ClusterNetworkPolicyRuleActionAccept
		if k%10 == 0 {
			to, action = cnpv1.ClusterNetworkPolicyEgressPeer{Networks: []cnpv1.CIDR{cnpv1.CIDR(fmt.Sprintf("192.168.%d.0/24", k%256))}}, cnpv1.ClusterNetworkPolicyRuleActionDeny
		}
		p.Spec.Egress = append(p.Spec.Egress, cnpOut(action, "to-apps", to, cnpTCP(5000+k)))
		if k == perTier-1 {
			p.Spec.Ingress = append(p.Spec.Ingress, cnpIn(cnpv1.ClusterNetworkPolicyRuleActionDeny, "default-deny",
				cnpv1.ClusterNetworkPolicyIngressPeer{Namespaces: &metav1.LabelSelector{}}))
		}
		out = append(out, p)
	}
	return out
}

// addClusterPolicies converts cnps as the agent does and adds them to cl.
func addClusterPolicies(cl *policy.Cluster, cnps []*cnpv1.ClusterNetworkPolicy) error {
	for _, c := range cnps {
		p, err := k8s.ToClusterPolicy(c)
		if err != nil {
			return fmt.Errorf("ClusterNetworkPolicy %s: %w", c.Name, err)
		}
		cl.SetClusterPolicy(c.Name, p)
	}
	return nil
}

// The change-latency benchmark's ClusterNetworkPolicies, over the pods of
// createLatencyPods (namespaces ns<n> labelled team=t<n%3>, pods app
// a<i%5>): policy k selects app a(k%5) in the namespaces of team t(k%3)
// and has one ingress rule, from app a((k+1)%5) of the same namespaces,
// and one egress rule to app a((k+2)%5) of team t((k+1)%3)'s. Even k are
// in the Admin tier (priority 100 + k/2), odd k in the Baseline tier
// (priority k/2); their actions rotate Deny, Accept, Pass (Baseline:
// Deny, Accept). Their ports (TCP 2000-19004, every third a range, every
// fifth UDP) are none the NetworkPolicies or the edits use.
func latencyClusterPolicy(k int) *cnpv1.ClusterNetworkPolicy {
	tier, prio := cnpv1.AdminTier, 100+k/2
	if k%2 == 1 {
		tier, prio = cnpv1.BaselineTier, k/2
	}
	team := func(i int) *metav1.LabelSelector { return matchLabels("team", fmt.Sprintf("t%d", i%3)) }
	p := newCNP(latencyCNPName(k), tier, prio, cnpv1.ClusterNetworkPolicySubject{Pods: cnpPods(team(k), matchLabels("app", latencyApp(k)))})
	action := func(i int) cnpv1.ClusterNetworkPolicyRuleAction {
		if tier == cnpv1.BaselineTier {
			return cnpActions[i%2]
		}
		return cnpActions[i%3]
	}
	port := 2000 + (k*7)%17000
	var proto cnpv1.ClusterNetworkPolicyProtocol
	switch {
	case k%5 == 4:
		proto = cnpUDP(port)
	case k%3 == 1:
		proto = cnpTCPRange(port, port+5)
	default:
		proto = cnpTCP(port)
	}
	p.Spec.Ingress = []cnpv1.ClusterNetworkPolicyIngressRule{cnpIn(action(k), "from-app",
		cnpv1.ClusterNetworkPolicyIngressPeer{Pods: cnpPods(team(k), matchLabels("app", latencyApp(k+1)))}, proto)}
	p.Spec.Egress = []cnpv1.ClusterNetworkPolicyEgressRule{cnpOut(action(k+1), "to-app",
		cnpv1.ClusterNetworkPolicyEgressPeer{Pods: cnpPods(team(k+1), matchLabels("app", latencyApp(k+2)))}, proto)}
	return p
}

func latencyCNPName(k int) string { return fmt.Sprintf("cnp%04d", k) }

// latencyCNPEdit is Admin policy k (k even) with its ingress rule
// rewritten to action on port: the edit the benchmark times. Its peers
// are as before, so latencyCNPPeers(k) is a connection it decides.
func latencyCNPEdit(k, port int, action cnpv1.ClusterNetworkPolicyRuleAction) *cnpv1.ClusterNetworkPolicy {
	p := latencyClusterPolicy(k)
	p.Spec.Ingress[0].Action = action
	p.Spec.Ingress[0].Protocols = []cnpv1.ClusterNetworkPolicyProtocol{cnpTCP(port)}
	return p
}

// latencyCNPPeers is a connection Admin policy k decides: from a pod its
// ingress rule names to a pod of the measured node it selects, in
// namespace k%3 (team t(k%3)).
func latencyCNPPeers(k int) (src, dst netip.Addr) { return latencyPeers(k%3, k) }

// The probe ClusterNetworkPolicy of the label changes: the Admin tier's
// first, accepting ingress from pods labelled role=cnp-prober to app a0
// on cnpProbePort, which nothing else allows.
const cnpProbePort = 9998

func latencyCNPProbe() *cnpv1.ClusterNetworkPolicy {
	p := newCNP("cnp-probe", cnpv1.AdminTier, 0, cnpv1.ClusterNetworkPolicySubject{
		Pods: cnpPods(&metav1.LabelSelector{}, matchLabels("app", latencyApp(0)))})
	p.Spec.Ingress = []cnpv1.ClusterNetworkPolicyIngressRule{cnpIn(cnpv1.ClusterNetworkPolicyRuleActionAccept, "probers",
		cnpv1.ClusterNetworkPolicyIngressPeer{Pods: cnpPods(&metav1.LabelSelector{}, matchLabels("role", "cnp-prober"))}, cnpTCP(cnpProbePort))}
	return p
}
