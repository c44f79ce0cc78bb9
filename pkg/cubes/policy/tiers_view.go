package policy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/netcube/netcube/pkg/model"
)

// TiersPath is where the agent's local API says, for each pod of this
// node some ClusterNetworkPolicy selects, the rules it is judged by in
// evaluation order (netcube policy get): {"10.244.1.5": TierView, ...}.
const TiersPath = "/v1/policy/tiers"

// TierView is a pod's tiers: the Admin rules, the NetworkPolicies, the
// Baseline rules, each direction in the order they are evaluated.
type TierView struct {
	Pod      string         `json:"pod"`
	RuleSet  uint32         `json:"rule_set"`
	Rules    []TierRuleView `json:"rules"`
	Policies []string       `json:"network_policies,omitempty"` // the NetworkPolicies selecting the pod (namespace/name)
	// NetworkPolicy isolates the pod: the Baseline is never reached in
	// that direction.
	IsolatedIngress bool `json:"np_isolated_ingress"`
	IsolatedEgress  bool `json:"np_isolated_egress"`
}

// TierRuleView is one rule as a person reads it.
type TierRuleView struct {
	Direction string           `json:"direction"`
	Tier      model.Tier       `json:"tier"`
	Policy    string           `json:"policy"`
	Priority  int32            `json:"priority"`
	Index     int              `json:"index"`
	Name      string           `json:"name,omitempty"`
	Action    model.RuleAction `json:"action"`
	Peers     string           `json:"peers"`
	Ports     string           `json:"ports"`
}

func (r *Reconciler) tiersHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		out := r.compiler.tierViews(r.cluster)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// tierViews are the tier sets' rules, by address of their pods.
func (c *Compiler) tierViews(cl *Cluster) map[string]TierView {
	out := map[string]TierView{}
	if c.t == nil {
		return out
	}
	for a, ep := range c.tiers.endpoints {
		ts := c.tiers.sets[ep.RuleSet]
		pod, ok := cl.PodAt(a)
		if ts == nil || !ok {
			continue
		}
		v := TierView{Pod: pod.ID.String(), RuleSet: ts.id, IsolatedIngress: ts.npIsolated[0], IsolatedEgress: ts.npIsolated[1], Rules: []TierRuleView{}}
		for _, np := range cl.sortedPolicies() {
			if np.ID.Namespace == pod.ID.Namespace && np.Pods.Matches(labelSet(pod.Labels)) {
				v.Policies = append(v.Policies, np.ID.String())
			}
		}
		for _, d := range []Direction{Ingress, Egress} {
			for _, r := range ts.rules(d) {
				v.Rules = append(v.Rules, TierRuleView{Direction: d.String(), Tier: r.Policy.Tier, Policy: r.Policy.Name, Priority: r.Policy.Priority,
					Index: r.Index, Name: r.Rule.Name, Action: r.Rule.Action, Peers: describePeers(r.Rule), Ports: describePorts(r.Rule.Ports)})
			}
		}
		out[a.String()] = v
	}
	return out
}

func describePeers(r *model.ClusterRule) string {
	if r.Everyone {
		return "every peer"
	}
	var s []string
	for _, p := range r.Peers {
		switch {
		case p.Block != nil:
			s = append(s, p.Block.CIDR.String())
		default:
			s = append(s, fmt.Sprintf("pods %s in namespaces %s", selectorText(p.Pods.String()), selectorText(p.Namespaces.String())))
		}
	}
	for _, n := range r.Nodes {
		s = append(s, "nodes "+selectorText(n.String()))
	}
	if len(s) == 0 {
		return "no peer"
	}
	return strings.Join(s, "; ")
}

func selectorText(s string) string {
	if s == "" {
		return "(all)"
	}
	return s
}

func describePorts(ports []model.PolicyPort) string {
	if len(ports) == 0 {
		return "every protocol and port"
	}
	var s []string
	for _, p := range ports {
		switch {
		case p.Name != "":
			s = append(s, "port "+p.Name)
		case p.Port == 0:
			s = append(s, p.Proto.String())
		case p.EndPort != 0:
			s = append(s, fmt.Sprintf("%s %d-%d", p.Proto, p.Port, p.EndPort))
		default:
			s = append(s, fmt.Sprintf("%s %d", p.Proto, p.Port))
		}
	}
	return strings.Join(s, ", ")
}

// tierAttribution names what decided a verdict for a pod of a tier set:
// the ClusterNetworkPolicy, or (nil, false) when NetworkPolicy or the
// default did (the caller then names the NetworkPolicies).
func (c *Compiler) tierAttribution(local netip.Addr, k attribKey) ([]string, bool) {
	ep, ok := c.tiers.endpoints[local]
	if !ok {
		return nil, false
	}
	ts := c.tiers.sets[ep.RuleSet]
	if ts == nil {
		return nil, false
	}
	pv, ok := c.tiers.peers[k.peer]
	if !ok {
		pv = peerView{id: k.peer}
	}
	rules := ts.rules(k.dir)
	_, by := c.decide(ts, k.dir, rules, pv, k.proto, k.port)
	if by == nil {
		return nil, false
	}
	return []string{by.Ref()}, true
}

// npRuleSetOf is the NetworkPolicy rule set of a pod of a tier set (its
// own otherwise).
func (c *Compiler) npRuleSetOf(rs uint32) uint32 {
	if ts := c.tiers.sets[rs]; ts != nil {
		return ts.npRS
	}
	return rs
}

// VerdictPath is where the agent's local API names the policies behind a
// verdict (PoliciesOf), for tools that judge packets themselves (netcube
// trace): ?local=&peer=&proto=&port=&egress=&allowed= answers
// ["ClusterNetworkPolicy:Admin:name"] or ["namespace/name", ...].
const VerdictPath = "/v1/policy/verdict"

func (r *Reconciler) verdictHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		local, err1 := netip.ParseAddr(q.Get("local"))
		peer, err2 := netip.ParseAddr(q.Get("peer"))
		var proto, port uint16
		_, err3 := fmt.Sscan(q.Get("proto")+" "+q.Get("port"), &proto, &port)
		if err := cmp.Or(err1, err2, err3); err != nil {
			http.Error(w, "want local, peer (addresses), proto, port (numbers), egress, allowed (true/false): "+err.Error(), http.StatusBadRequest)
			return
		}
		names := r.PoliciesOf(local.Unmap(), q.Get("egress") == "true", peer.Unmap(), model.Proto(proto), port, q.Get("allowed") == "true")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(append([]string{}, names...))
	})
}
