package policy

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/netcube/netcube/pkg/model"
)

// Cluster is what the policy cube knows of the cluster: every pod,
// namespace and NetworkPolicy (each node needs all of them: a peer may be
// any pod). It is not safe for concurrent use; the reconciler owns it.
type Cluster struct {
	Pods       map[model.PodID]*model.Pod
	Namespaces map[string]*model.Namespace
	Policies   map[model.PolicyID]*model.Policy
	// ClusterPolicies are the ClusterNetworkPolicies, by name (tiers.go).
	ClusterPolicies map[string]*model.ClusterPolicy
	// Nodes are the cluster's nodes, for ClusterNetworkPolicy's egress
	// nodes peers (their addresses, selected by their labels).
	Nodes map[string]*model.NodeInfo
	// byIP: the pod of each address (host-network pods have their
	// node's, and are not in it), for naming events.
	byIP map[netip.Addr]model.PodID
}

// NewCluster returns an empty cluster.
func NewCluster() *Cluster {
	return &Cluster{
		Pods:            map[model.PodID]*model.Pod{},
		Namespaces:      map[string]*model.Namespace{},
		Policies:        map[model.PolicyID]*model.Policy{},
		ClusterPolicies: map[string]*model.ClusterPolicy{},
		Nodes:           map[string]*model.NodeInfo{},
		byIP:            map[netip.Addr]model.PodID{},
	}
}

// SetPod adds or replaces a pod; nil deletes it.
func (c *Cluster) SetPod(id model.PodID, p *model.Pod) {
	if old := c.Pods[id]; old != nil {
		for _, a := range old.IPs {
			if c.byIP[a] == id {
				delete(c.byIP, a)
			}
		}
	}
	if p == nil {
		delete(c.Pods, id)
		return
	}
	c.Pods[id] = p
	if !p.HostNetwork {
		for _, a := range p.IPs {
			c.byIP[a] = id
		}
	}
}

// PodAt returns the pod with address a.
func (c *Cluster) PodAt(a netip.Addr) (*model.Pod, bool) {
	id, ok := c.byIP[a]
	if !ok {
		return nil, false
	}
	p, ok := c.Pods[id]
	return p, ok
}

// SetNamespace adds or replaces a namespace; nil deletes it.
func (c *Cluster) SetNamespace(name string, ns *model.Namespace) {
	if ns == nil {
		delete(c.Namespaces, name)
		return
	}
	c.Namespaces[name] = ns
}

// SetPolicy adds or replaces a policy; nil deletes it.
func (c *Cluster) SetPolicy(id model.PolicyID, p *model.Policy) {
	if p == nil {
		delete(c.Policies, id)
		return
	}
	c.Policies[id] = p
}

// SetClusterPolicy adds or replaces a ClusterNetworkPolicy; nil deletes it.
func (c *Cluster) SetClusterPolicy(name string, p *model.ClusterPolicy) {
	if p == nil {
		delete(c.ClusterPolicies, name)
		return
	}
	c.ClusterPolicies[name] = p
}

// SetNode adds or replaces a node; nil deletes it.
func (c *Cluster) SetNode(name string, n *model.NodeInfo) {
	if n == nil {
		delete(c.Nodes, name)
		return
	}
	c.Nodes[name] = n
}

// nodesPeersUsed says whether some ClusterNetworkPolicy has a nodes peer
// (then a node's change recompiles).
func (c *Cluster) nodesPeersUsed() bool {
	for _, cp := range c.ClusterPolicies {
		for _, rules := range [][]model.ClusterRule{cp.Ingress, cp.Egress} {
			for _, r := range rules {
				if len(r.Nodes) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// nodeAddrs are the addresses of the nodes sel selects.
func (c *Cluster) nodeAddrs(sel labels.Selector) []netip.Addr {
	var out []netip.Addr
	for _, n := range c.Nodes {
		if sel.Matches(labelSet(n.Labels)) {
			out = append(out, n.Addresses...)
		}
	}
	return out
}

// sortedPods are the pods in a stable order (identities and messages do
// not depend on map order).
func (c *Cluster) sortedPods() []*model.Pod {
	return slices.SortedFunc(maps.Values(c.Pods), func(a, b *model.Pod) int { return comparePodIDs(a.ID, b.ID) })
}

// sortedPolicies are the policies in a stable order.
func (c *Cluster) sortedPolicies() []*model.Policy {
	return slices.SortedFunc(maps.Values(c.Policies), func(a, b *model.Policy) int { return comparePolicyIDs(a.ID, b.ID) })
}

// comparePodIDs and comparePolicyIDs order names by namespace, then name.
func comparePodIDs(a, b model.PodID) int {
	if a.Namespace != b.Namespace {
		return cmp.Compare(a.Namespace, b.Namespace)
	}
	return cmp.Compare(a.Name, b.Name)
}

func comparePolicyIDs(a, b model.PolicyID) int {
	if a.Namespace != b.Namespace {
		return cmp.Compare(a.Namespace, b.Namespace)
	}
	return cmp.Compare(a.Name, b.Name)
}

// nsLabels are a namespace's labels (none if it is unknown).
func (c *Cluster) nsLabels(name string) map[string]string {
	if ns := c.Namespaces[name]; ns != nil {
		return ns.Labels
	}
	return nil
}
