package kube

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
)

// podClaims merges the two places an agent learns pods from with
// --pod-source=nodepods: its own node's Pod objects (local), and the
// NodePods object of every other node (remote), into the one pod per key
// the handler is given.
//
// A pod key can be claimed by more than one node for a while: a
// StatefulSet's pod deleted on a node whose agent is down (its NodePods
// still lists it) and created again on another. The local Pod object wins,
// being the API server's own word; among remote claims the latest wins,
// and when it is withdrawn the one before it is delivered again, so that
// the stale object's later update cannot delete the live pod.
//
// A remote claim counts only while its Node exists and the pod's
// addresses are in that Node's pod CIDRs: a NodePods left behind by a
// deleted Node, or one listing addresses its node cannot have given (a
// bug, a stale object after the CIDR moved, a forgery), fails closed, and
// is reported (refuse).
type podClaims struct {
	deliver func(types.NamespacedName, *model.Pod)
	// refuse is told, per node, which of its NodePods' pods are not used
	// and why ("": all are), once the Nodes are listed (nodesListed:
	// before, a Node not known yet is not a Node missing, and every
	// agent's start would report every other node).
	refuse      func(node, problem string)
	nodesListed bool
	// changed (buffered, 1) is signalled when the local pods change: the
	// writer of this node's NodePods wakes.
	changed chan struct{}

	mu     sync.Mutex
	local  map[types.NamespacedName]*model.Pod
	remote map[string]map[types.NamespacedName]*model.Pod // node → its pods
	// order: the sequence number of each node's claim of a key (newer:
	// higher); a claim keeps its number while the node repeats it
	// unchanged.
	order map[types.NamespacedName]map[string]uint64
	seq   uint64
	shown map[types.NamespacedName]*model.Pod // what the handler was given
	// nodeCIDRs: each Node's pod CIDRs (present: the Node exists).
	nodeCIDRs map[string][]netip.Prefix
}

func newPodClaims(deliver func(types.NamespacedName, *model.Pod)) *podClaims {
	return &podClaims{
		deliver: deliver,
		changed: make(chan struct{}, 1),
		local:   map[types.NamespacedName]*model.Pod{},
		remote:  map[string]map[types.NamespacedName]*model.Pod{},
		order:   map[types.NamespacedName]map[string]uint64{},
		shown:   map[types.NamespacedName]*model.Pod{},
		refuse:  func(string, string) {},

		nodeCIDRs: map[string][]netip.Prefix{},
	}
}

// setNodeInfo records a Node's pod CIDRs (nil: the Node is deleted); its
// NodePods' pods are judged again.
func (c *podClaims) setNodeInfo(name string, n *model.NodeInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.nodeCIDRs[name]
	if n == nil {
		delete(c.nodeCIDRs, name)
	} else {
		c.nodeCIDRs[name] = slices.Clone(n.PodCIDRs)
	}
	if had == (n != nil) && (n == nil || slices.Equal(old, n.PodCIDRs)) {
		return
	}
	for _, k := range sortedKeys(c.remote[name]) {
		c.show(k)
	}
	c.judge(name)
}

// admitted: pod p, claimed by node, is on it as far as its Node says.
func (c *podClaims) admitted(node string, p *model.Pod) bool {
	cidrs, ok := c.nodeCIDRs[node]
	if !ok {
		return false
	}
	for _, a := range p.IPs {
		if !slices.ContainsFunc(cidrs, func(pf netip.Prefix) bool { return pf.Contains(a) }) {
			return false
		}
	}
	return true
}

// setNodesListed: the Nodes' first list is complete; every NodePods is
// judged.
func (c *podClaims) setNodesListed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodesListed = true
	for _, n := range slices.Sorted(maps.Keys(c.remote)) {
		c.judge(n)
	}
}

// judge tells refuse which of node's claimed pods are not admitted.
func (c *podClaims) judge(node string) {
	if !c.nodesListed {
		return
	}
	pods, ok := c.remote[node]
	if !ok {
		c.refuse(node, "")
		return
	}
	if _, exists := c.nodeCIDRs[node]; !exists && len(pods) > 0 {
		c.refuse(node, fmt.Sprintf("no Node %s: none of its %d pods is used", node, len(pods)))
		return
	}
	var out []string
	for _, k := range sortedKeys(pods) {
		if p := pods[k]; !c.admitted(node, p) {
			out = append(out, fmt.Sprintf("%s at %v", k, p.IPs))
		}
	}
	if len(out) == 0 {
		c.refuse(node, "")
		return
	}
	c.refuse(node, fmt.Sprintf("pods outside Node %s's pod CIDRs %v, not used: %s", node, c.nodeCIDRs[node], strings.Join(out, ", ")))
}

// setLocal records this node's pod k (nil: deleted, or finished).
func (c *podClaims) setLocal(k types.NamespacedName, p *model.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.local[k]
	if p == nil {
		delete(c.local, k)
	} else {
		c.local[k] = p
	}
	if had != (p != nil) || !samePod(old, p) {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
	c.show(k)
}

// setNode replaces the pods another node claims (nil: its NodePods is
// gone).
func (c *podClaims) setNode(node string, pods []*model.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.remote[node]
	now := make(map[types.NamespacedName]*model.Pod, len(pods))
	for _, p := range pods {
		k := types.NamespacedName{Namespace: p.ID.Namespace, Name: p.ID.Name}
		now[k] = p
		if prev, ok := old[k]; ok && samePod(prev, p) {
			continue // the claim keeps its place
		}
		if c.order[k] == nil {
			c.order[k] = map[string]uint64{}
		}
		c.seq++
		c.order[k][node] = c.seq
	}
	for k := range old {
		if _, ok := now[k]; !ok {
			delete(c.order[k], node)
			if len(c.order[k]) == 0 {
				delete(c.order, k)
			}
		}
	}
	if pods == nil {
		delete(c.remote, node)
	} else {
		c.remote[node] = now
	}
	for _, k := range sortedKeys(now) {
		c.show(k)
	}
	for _, k := range sortedKeys(old) {
		if _, ok := now[k]; !ok {
			c.show(k)
		}
	}
	c.judge(node)
}

// sortedKeys: the handler is told of a node's pods in one order.
func sortedKeys(m map[types.NamespacedName]*model.Pod) []types.NamespacedName {
	return slices.SortedFunc(maps.Keys(m), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
}

// show delivers k's winning claim, if it is not what the handler has.
func (c *podClaims) show(k types.NamespacedName) {
	p := c.local[k]
	if p == nil {
		var best uint64
		for node, seq := range c.order[k] {
			if seq > best && c.admitted(node, c.remote[node][k]) {
				best, p = seq, c.remote[node][k]
			}
		}
	}
	old, had := c.shown[k]
	if (p == nil && !had) || (had && samePod(old, p)) {
		return
	}
	if p == nil {
		delete(c.shown, k)
	} else {
		c.shown[k] = p
	}
	c.deliver(k, p)
}

// localPods are this node's pods, for its NodePods.
func (c *podClaims) localPods() []*model.Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Values(c.local))
}

// localKeys and nodes are what the two streams hold (a relist delivers
// what its list lacks as deleted).
func (c *podClaims) localKeys() []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.local))
}

func (c *podClaims) nodes() []types.NamespacedName {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(c.remote))
	for n := range c.remote {
		out = append(out, types.NamespacedName{Name: n})
	}
	return out
}

// samePod: a and b would be enforced alike (both nil counts as same).
func samePod(a, b *model.Pod) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Node == b.Node && a.HostNetwork == b.HostNetwork &&
		a.EgressBandwidth == b.EgressBandwidth && a.IngressBandwidth == b.IngressBandwidth &&
		maps.Equal(a.Labels, b.Labels) && slices.Equal(a.IPs, b.IPs) && slices.Equal(a.Ports, b.Ports)
}
