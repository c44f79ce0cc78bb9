package metrics

import (
	"github.com/netcube/netcube/pkg/events"
)

// match is the policy rule that decided, as Cilium's policy handler names
// it (monitor/api.PolicyMatchType, lower-cased).
type match uint8

const (
	matchNone    match = iota // no rule allowed it: a drop
	matchL3L4                 // peer-and-port
	matchL3Only               // peer-all-ports
	matchL4Only               // any-peer-and-port
	matchAll                  // any-peer-all-ports
	matchUnknown              // denied
	nMatches
)

var matchNames = [nMatches]string{"none", "l3-l4", "l3-only", "l4-only", "all", "unknown"}

// matchOf reads events.PolicyVerdict.Rule. A ClusterNetworkPolicy's
// deny ("denied") is "unknown": the datapath reports that an entry denied,
// not whether it named the peer, the port or both, which Cilium's match
// would say.
func matchOf(rule string) (match, bool) {
	switch rule {
	case "":
		return matchNone, true
	case "peer-and-port":
		return matchL3L4, true
	case "peer-all-ports":
		return matchL3Only, true
	case "any-peer-and-port":
		return matchL4Only, true
	case "any-peer-all-ports":
		return matchAll, true
	case "denied":
		return matchUnknown, true
	}
	// from-node: the node's own traffic to its pods, always allowed;
	// Cilium's policy handler does not count the host's verdicts either.
	return 0, false
}

// countPolicy counts a policy's verdict: a connection it allowed, or a
// packet it dropped. Cilium's datapath reports a denied packet twice, as
// a drop and as a policy verdict, and counts the latter here; netcube's
// reports it once, as a drop naming the policy, so that drop is the
// verdict "dropped".
func (m *Metrics) countPolicy(e *events.Event, k kind) {
	mt, ok := matchOf(e.Policy.Rule)
	if !ok {
		return
	}
	dir := 0
	if e.Policy.Direction == "egress" {
		dir = 1
	}
	action := 0
	if k == kindDrop {
		action = 1
	}
	c := &m.policyCounters[dir][mt][action]
	if *c == nil {
		*c = m.verdicts.WithLabelValues([2]string{"ingress", "egress"}[dir], matchNames[mt], [2]string{"forwarded", "dropped"}[action])
	}
	(*c).Inc()
}
