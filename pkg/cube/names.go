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
func (n *Names) Add(p PodNamer, s ServiceNamer) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p != nil {
		n.pods = append(n.pods, p)
	}
	if s != nil {
		n.services = append(n.services, s)
	}
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
