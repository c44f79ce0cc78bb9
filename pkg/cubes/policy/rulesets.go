package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netcube/netcube/pkg/model"
)

// ruleSet is the number the entries of this node's pods alike are filed
// under, and how many of those pods hold it. Pods are alike when they
// share a namespace, labels and named ports: the same policies select
// them (a policy selects by labels in its namespace) and give them the
// same entries (an ingress rule's named port is the pod's own), so their
// entries are written once, not once per pod, and a new peer identity
// costs each policy's rules once per rule set. Its number has the high
// bit set (firstRuleSet on), so it is never a pod's number, of this agent
// or of one before rule sets, whose entries were filed under the pods'
// numbers (policy_maps.h, upgradeEndpoint).
type ruleSet struct {
	id      uint32
	members int
}

// firstRuleSet is the first rule set number: past every pod's.
const firstRuleSet = 1 << 31

// ruleSetKey is what makes two pods alike.
func ruleSetKey(p *model.Pod) string {
	ports := make([]string, 0, len(p.Ports))
	for _, np := range p.Ports {
		ports = append(ports, fmt.Sprintf("%s/%s/%d", np.Name, np.Proto, np.Port))
	}
	slices.Sort(ports)
	return p.ID.Namespace + "\x00" + labelsKey(p.Labels) + "\x00" + strings.Join(ports, ",")
}

// joinRuleSet makes this node's pod p a member of its rule set, made if
// new, and returns the set's number.
func (c *Compiler) joinRuleSet(p *model.Pod) uint32 {
	key := ruleSetKey(p)
	rs := c.ruleSets[key]
	if rs == nil {
		rs = &ruleSet{id: c.nextRuleSet}
		c.nextRuleSet++
		c.ruleSets[key] = rs
	}
	rs.members++
	return rs.id
}

// leaveRuleSet takes pod p (as it was when it joined) out of its rule
// set, which goes with its last member.
func (c *Compiler) leaveRuleSet(p *model.Pod) {
	key := ruleSetKey(p)
	if rs := c.ruleSets[key]; rs != nil {
		if rs.members--; rs.members <= 0 {
			delete(c.ruleSets, key)
		}
	}
}
