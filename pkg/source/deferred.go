package source

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
)

// Deferred is a Handler (and PolicyHandler and SliceHandler) that keeps
// what it is handed until Attach gives it the real handler, then hands the
// kept changes on, in the order they came, and passes every later one
// straight through. The agent runs its source into one while it loads its
// datapath (about a second of the verifier), so the API server's lists
// are under way by the time anything can be programmed.
//
// Policy and slice changes are dropped when the real handler does not take
// them. What the handler holds (ServiceKeys, …) is asked only when a
// source relists, which waits for Attach.
type Deferred struct {
	mu       sync.Mutex
	h        Handler // nil until Attach
	kept     []func(Handler)
	attached chan struct{} // closed by Attach
	once     sync.Once
}

func (d *Deferred) init() { d.once.Do(func() { d.attached = make(chan struct{}) }) }

// Attach hands the kept changes to h, then makes d pass changes straight
// to it. Changes arriving meanwhile wait, so none overtakes a kept one.
func (d *Deferred) Attach(h Handler) {
	d.init()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range d.kept {
		f(h)
	}
	d.kept, d.h = nil, h
	close(d.attached)
}

// do hands a change to the real handler, or keeps it until there is one.
func (d *Deferred) do(f func(Handler)) {
	d.mu.Lock()
	h := d.h
	if h == nil {
		d.kept = append(d.kept, f)
	}
	d.mu.Unlock()
	if h != nil {
		f(h)
	}
}

// handler waits for Attach and returns the real handler.
func (d *Deferred) handler() Handler {
	d.init()
	<-d.attached
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.h
}

func (d *Deferred) OnService(k types.NamespacedName, s *model.Service) {
	d.do(func(h Handler) { h.OnService(k, s) })
}

func (d *Deferred) OnEndpointSlice(k types.NamespacedName, s *model.EndpointSlice) {
	d.do(func(h Handler) { h.OnEndpointSlice(k, s) })
}

func (d *Deferred) OnNode(name string, n *model.NodeInfo) {
	d.do(func(h Handler) { h.OnNode(name, n) })
}

func (d *Deferred) OnSynced() { d.do(Handler.OnSynced) }

func (d *Deferred) ServiceKeys() []types.NamespacedName { return d.handler().ServiceKeys() }

func (d *Deferred) EndpointSliceKeys() []types.NamespacedName {
	return d.handler().EndpointSliceKeys()
}

// policy runs f on the real handler if it takes policy changes.
func (d *Deferred) policy(f func(PolicyHandler)) {
	d.do(func(h Handler) {
		if ph, ok := h.(PolicyHandler); ok {
			f(ph)
		}
	})
}

func (d *Deferred) OnPod(k types.NamespacedName, p *model.Pod) {
	d.policy(func(h PolicyHandler) { h.OnPod(k, p) })
}

func (d *Deferred) OnNamespace(name string, ns *model.Namespace) {
	d.policy(func(h PolicyHandler) { h.OnNamespace(name, ns) })
}

func (d *Deferred) OnPolicy(k types.NamespacedName, p *model.Policy) {
	d.policy(func(h PolicyHandler) { h.OnPolicy(k, p) })
}

func (d *Deferred) OnPoliciesSynced() { d.policy(PolicyHandler.OnPoliciesSynced) }

func (d *Deferred) PodKeys() []types.NamespacedName {
	if ph, ok := d.handler().(PolicyHandler); ok {
		return ph.PodKeys()
	}
	return nil
}

func (d *Deferred) NamespaceKeys() []types.NamespacedName {
	if ph, ok := d.handler().(PolicyHandler); ok {
		return ph.NamespaceKeys()
	}
	return nil
}

func (d *Deferred) PolicyKeys() []types.NamespacedName {
	if ph, ok := d.handler().(PolicyHandler); ok {
		return ph.PolicyKeys()
	}
	return nil
}

func (d *Deferred) OnClusterPolicy(name string, p *model.ClusterPolicy) {
	d.do(func(h Handler) {
		if ch, ok := h.(ClusterPolicyHandler); ok {
			ch.OnClusterPolicy(name, p)
		}
	})
}

func (d *Deferred) ClusterPolicyKeys() []string {
	if ch, ok := d.handler().(ClusterPolicyHandler); ok {
		return ch.ClusterPolicyKeys()
	}
	return nil
}

func (d *Deferred) OnSlice(name string, s *model.Slice) {
	d.do(func(h Handler) {
		if sh, ok := h.(SliceHandler); ok {
			sh.OnSlice(name, s)
		}
	})
}

func (d *Deferred) OnSlicesSynced() {
	d.do(func(h Handler) {
		if sh, ok := h.(SliceHandler); ok {
			sh.OnSlicesSynced()
		}
	})
}

func (d *Deferred) SliceKeys() []string {
	if sh, ok := d.handler().(SliceHandler); ok {
		return sh.SliceKeys()
	}
	return nil
}

func (d *Deferred) OnBGPPeering(name string, p *model.BGPPeering) {
	d.do(func(h Handler) {
		if bh, ok := h.(BGPHandler); ok {
			bh.OnBGPPeering(name, p)
		}
	})
}

func (d *Deferred) OnBGPPeeringsSynced() {
	d.do(func(h Handler) {
		if bh, ok := h.(BGPHandler); ok {
			bh.OnBGPPeeringsSynced()
		}
	})
}

func (d *Deferred) BGPPeeringKeys() []string {
	if bh, ok := d.handler().(BGPHandler); ok {
		return bh.BGPPeeringKeys()
	}
	return nil
}

var (
	_ PolicyHandler = (*Deferred)(nil)
	_ SliceHandler  = (*Deferred)(nil)
	_ BGPHandler    = (*Deferred)(nil)
)
