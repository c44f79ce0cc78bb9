package policy

import (
	"errors"
	"maps"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// health is what the last pass that wrote the maps could not write, and
// the pods it concerns: the agent's /readyz and `netcube status` show
// it, and each pod concerned has an Event. Guarded by Reconciler.mu.
type health struct {
	err  *SyncError
	pods map[model.PodID]string // each pod concerned: what became of it
}

// PolicyFailures lists what the policy maps lack: the last pass's
// failure and each pod it concerns (empty: every pod's policy is
// written), for /readyz and `netcube status`.
func (r *Reconciler) PolicyFailures() map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.health.err == nil {
		return nil
	}
	out := map[string]error{"policy maps": r.health.err}
	for id, msg := range r.health.pods {
		out[podObject(id).String()] = errors.New(msg)
	}
	return out
}

// Messages on a pod whose policy could not be written.
const (
	quarantinedMsg = "its NetworkPolicy could not be written into this node's maps, so the pod is quarantined " +
		"(isolated both ways: it reaches nothing and nothing reaches it but its node) until it is: "
	openMsg = "its NetworkPolicy could not be written into this node's maps, nor its quarantine " +
		"(pol_endpoints is full: raise --router-endpoints-max); the datapath judges it as the maps held it before: "
)

// setHealth records se (nil: everything written) and reports each pod it
// concerns on the pod, clearing the reports of pods no longer concerned.
func (r *Reconciler) setHealth(se *SyncError) {
	pods := map[model.PodID]string{}
	if se != nil {
		for a := range se.Quarantined {
			if p, ok := r.cluster.PodAt(a); ok {
				pods[p.ID] = quarantinedMsg + se.Error()
			}
		}
		for a := range se.Open {
			if p, ok := r.cluster.PodAt(a); ok {
				pods[p.ID] = openMsg + se.Error()
			}
		}
	}
	for id, msg := range pods {
		if r.health.pods[id] != msg {
			r.report.Set(podObject(id), report.PolicyNotWritten, msg)
		}
	}
	for id := range r.health.pods {
		if _, ok := pods[id]; !ok {
			r.report.Clear(podObject(id), report.PolicyNotWritten)
		}
	}
	r.health = health{err: se, pods: pods}
}

func podObject(id model.PodID) report.Object {
	return report.Object{Kind: "Pod", Namespace: id.Namespace, Name: id.Name}
}

// quarantineUnselected quarantines this node's pods that no policy
// selects (so SyncChanges had no endpoint of theirs to quarantine) whose
// identity was not written: their packets would be judged as another's
// (a wider IP block region, or whoever held the address before).
func (r *Reconciler) quarantineUnselected(t *Tables, se *SyncError) {
	for a := range se.Hosts {
		p, ok := r.cluster.PodAt(a)
		if !ok || p.Node != r.node || p.HostNetwork {
			continue
		}
		if _, selected := t.Endpoints[a]; selected {
			continue // quarantined by SyncChanges
		}
		v := quarantinedEndpoint(r.compiler.endpointID(p.ID))
		for _, pa := range p.IPs {
			if err := cube.Put(r.maps, MapEndpoints, datapath.AddrFrom(pa), v); err != nil {
				se.endpoint(pa, err)
				continue
			}
			se.quarantine(pa)
		}
	}
}

// union is the set of the keys of a and b.
func union[K comparable](a, b map[K]struct{}) map[K]struct{} {
	out := maps.Clone(a)
	if out == nil {
		out = map[K]struct{}{}
	}
	maps.Copy(out, b)
	return out
}
