package policy

import (
	"net/netip"
	"slices"

	"github.com/netcube/netcube/pkg/model"
)

// The datapath's policy verdicts name the kind of rule that decided (peer
// and port, any peer, …), not the NetworkPolicy: its entries merge every
// policy's rules. PoliciesOf names them for the events the agent serves
// (netcube monitor, Hubble's ingress_allowed_by and kin), re-deriving
// which policies' rules allow the connection from the cluster and the last
// compilation. A node sees few distinct (pod, peer, port) verdicts, so each
// answer is kept until the next compilation.

// attribKey is one verdict as the datapath reports it.
type attribKey struct {
	local   netip.Addr
	dir     Direction
	peer    Identity
	proto   model.Proto
	port    uint16
	allowed bool
}

// maxAttributions bounds the kept answers (then they are all forgotten).
const maxAttributions = 4096

// PoliciesOf names the NetworkPolicies behind a verdict for the pod at
// local (cube.PolicyNamer): allowed, those with a rule allowing the peer
// on proto/port; dropped, those isolating the pod in that direction. None
// for a pod no policy selects, or a connection from the node itself
// (always allowed).
func (r *Reconciler) PoliciesOf(local netip.Addr, egress bool, peer netip.Addr, proto model.Proto, port uint16, allowed bool) []string {
	dir := Ingress
	if egress {
		dir = Egress
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.compiler.Tables()
	if t == nil {
		return nil
	}
	ep, ok := t.Endpoints[local]
	if !ok {
		return nil
	}
	pod, ok := r.cluster.PodAt(local)
	if !ok {
		return nil
	}
	k := attribKey{local: local, dir: dir, peer: t.PeerOf(peer), proto: proto, port: port, allowed: allowed}
	if k.peer == Host && dir == Ingress {
		return nil
	}
	if ids, ok := r.attributions[k]; ok {
		return ids
	}
	ids, ok := r.compiler.tierAttribution(local, k)
	if !ok {
		ids = r.compiler.policiesOf(r.cluster, pod, r.compiler.npRuleSetOf(ep.RuleSet), k)
	}
	if len(r.attributions) >= maxAttributions {
		clear(r.attributions)
	}
	r.attributions[k] = ids
	return ids
}

// policiesOf is PoliciesOf's answer (namespace/name, sorted), from the
// policies of pod's namespace that select it: each rule compiled alone and
// looked up as the datapath looks its entries up.
func (c *Compiler) policiesOf(cl *Cluster, pod *model.Pod, rs uint32, k attribKey) []string {
	var out []string
	for _, pol := range cl.Policies {
		if pol.ID.Namespace != pod.ID.Namespace || !pol.Pods.Matches(labelSet(pod.Labels)) {
			continue
		}
		isolates, rules := pol.IsolatesIngress, pol.Ingress
		if k.dir == Egress {
			isolates, rules = pol.IsolatesEgress, pol.Egress
		}
		if !isolates {
			continue
		}
		if !k.allowed {
			out = append(out, pol.ID.String())
			continue
		}
		for i := range rules {
			t := &Tables{Entries: map[Entry]struct{}{}}
			c.addRule(t.Entries, &rulePeers{}, pol, &rules[i], rs, k.dir, pod, nil)
			if t.allows(rs, k.dir, k.peer, k.proto, k.port) {
				out = append(out, pol.ID.String())
				break
			}
		}
	}
	slices.Sort(out)
	return out
}
