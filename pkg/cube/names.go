package cube

import (
	"net/netip"
	"sync"

	"github.com/netcube/netcube/pkg/model"
)

// PodNamer names pods by address (the policy cube knows every pod of the
// cluster).
type PodNamer interface {
	PodAt(addr netip.Addr) (id model.PodID, labels map[string]string, ok bool)
}

// ServiceNamer names Services by a frontend or by its revNAT id, the
// number the datapath's events carry (the load balancer cube).
type ServiceNamer interface {
	ServiceAt(fe model.Frontend) (model.ServiceID, bool)
	ServiceByRevNAT(id uint32) (model.ServiceID, bool)
}

// PolicyNamer names the NetworkPolicies behind a policy verdict of the
// datapath (the policy cube): for a connection allowed, those with a rule
// allowing it; for one dropped, those isolating the pod in that direction
// (none of whose rules allowed it). local is the pod the verdict is for,
// peer the other end, port the destination port. The names
// (namespace/name, sorted) may be shared between answers: read only.
type PolicyNamer interface {
	PoliciesOf(local netip.Addr, egress bool, peer netip.Addr, proto model.Proto, port uint16, allowed bool) []string
}

// NetnsNamer finds a pod's address by its network namespace's cookie,
// all a socket hook's event knows of the pod (package podnetns).
type NetnsNamer interface {
	AddrOf(cookie uint64, family uint8) (netip.Addr, bool)
}

// Names are the namers of the started cubes, for the events the agent
// serves: the agent adds each cube's as it starts (Env.Names), so a cube
// started earlier (the monitor) asks those started later.
type Names struct {
	mu       sync.RWMutex
	pods     []PodNamer
	services []ServiceNamer
	policies []PolicyNamer
	// Netns, if set, names the pods of socket events (the agent's).
	Netns NetnsNamer
}

// AddrOfNetns asks Netns.
func (n *Names) AddrOfNetns(cookie uint64, family uint8) (netip.Addr, bool) {
	if n == nil || n.Netns == nil || cookie == 0 {
		return netip.Addr{}, false
	}
	return n.Netns.AddrOf(cookie, family)
}

// Add adds a cube's namers (nil ones are skipped).
func (n *Names) Add(p PodNamer, s ServiceNamer, pol PolicyNamer) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p != nil {
		n.pods = append(n.pods, p)
	}
	if s != nil {
		n.services = append(n.services, s)
	}
	if pol != nil {
		n.policies = append(n.policies, pol)
	}
}

// PoliciesOf asks each policy namer.
func (n *Names) PoliciesOf(local netip.Addr, egress bool, peer netip.Addr, proto model.Proto, port uint16, allowed bool) []string {
	if n == nil {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, p := range n.policies {
		if ids := p.PoliciesOf(local, egress, peer, proto, port, allowed); len(ids) > 0 {
			return ids
		}
	}
	return nil
}

// PodAt asks each pod namer.
func (n *Names) PodAt(addr netip.Addr) (model.PodID, map[string]string, bool) {
	if n == nil {
		return model.PodID{}, nil, false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, p := range n.pods {
		if id, l, ok := p.PodAt(addr); ok {
			return id, l, true
		}
	}
	return model.PodID{}, nil, false
}

// ServiceAt asks each Service namer.
func (n *Names) ServiceAt(fe model.Frontend) (model.ServiceID, bool) {
	if n == nil {
		return model.ServiceID{}, false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, s := range n.services {
		if id, ok := s.ServiceAt(fe); ok {
			return id, true
		}
	}
	return model.ServiceID{}, false
}

// ServiceByRevNAT asks each Service namer.
func (n *Names) ServiceByRevNAT(revNAT uint32) (model.ServiceID, bool) {
	if n == nil {
		return model.ServiceID{}, false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, s := range n.services {
		if id, ok := s.ServiceByRevNAT(revNAT); ok {
			return id, true
		}
	}
	return model.ServiceID{}, false
}
