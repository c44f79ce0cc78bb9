package lb

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
)

// A frontend (address, port, protocol) is programmed for one Service at a
// time. Two Services may claim the same one: an ExternalIP or LoadBalancer
// IP and port, which the API server does not keep unique, or a ClusterIP in
// hand-written manifests. The owner is the Service created first
// (metadata.creationTimestamp; unknown counts as newest), ties going to the
// first by namespace/name, so every agent picks the same one whatever the
// order it learns of them. The others are reported; when the owner lets go
// of the frontend (deleted, or no longer claiming it), the next one in
// that order takes it over.
type owners struct {
	// of: the Service programming each claimed frontend, by the
	// frontend's key in lb_services (slot 0: 24 bytes and no pointer,
	// where a model.Frontend takes 32 with one; 2.4 MB less at 100,000
	// dual-stack Services, and a map the collector does not scan the keys
	// of), by reference to its ID (8 bytes where the ID takes 32): the ID
	// in the Service's model (idRef), which the next sync of that Service
	// points at its new model, or rarely a copy.
	of map[datapath.ServiceKey]*model.ServiceID
	// contenders: for the frontends claimed by more than one Service (rare),
	// every claimant.
	contenders map[model.Frontend][]model.ServiceID
}

func newOwners() owners {
	return owners{of: map[datapath.ServiceKey]*model.ServiceID{}, contenders: map[model.Frontend][]model.ServiceID{}}
}

// owner is the Service that owns fe, if one does.
func (o *owners) owner(fe model.Frontend) (model.ServiceID, bool) {
	return o.ownerOf(ownerKey(fe))
}

// ownerOf is owner, for the frontend whose key (ownerKey) is k.
func (o *owners) ownerOf(k datapath.ServiceKey) (model.ServiceID, bool) {
	if p := o.of[k]; p != nil {
		return *p, true
	}
	return model.ServiceID{}, false
}

// ownerKey is fe's key in owners.of and in a Service's applied list: its
// own in lb_services.
func ownerKey(fe model.Frontend) datapath.ServiceKey { return serviceKey(fe, 0) }

// ownerName is the Service that owns fe (the zero ID if none). r.mu is
// held.
func (r *Reconciler) ownerName(fe model.Frontend) model.ServiceID {
	id, _ := r.owners.owner(fe)
	return id
}

// idRef is a reference to id for owners.of: the ID of id's Service model
// if there is one, else a copy. r.mu is held.
func (r *Reconciler) idRef(id model.ServiceID) *model.ServiceID {
	if st := r.existing(id); st != nil && st.svc != nil && st.svc.ID == id {
		return &st.svc.ID
	}
	cp := new(model.ServiceID) // (not &id: that would move id to the heap on every call)
	*cp = id
	return cp
}

// claim records that id wants exactly the frontends in wanted (nil: none),
// having had applied before, and returns which of them id owns, and the
// other Services whose share changed (to be synced again). Its cost is in
// the Service's frontends and the few contended ones, never in the number
// of Services. r.mu is held.
func (r *Reconciler) claim(id model.ServiceID, wanted []model.Frontend, applied frontendKeys) (won frontendSet, changed []model.ServiceID) {
	won = newFrontendSet(len(wanted))
	return won, r.claimInto(&won, id, wanted, applied)
}

// claimInto is claim, adding the frontends id owns to won (emptied first:
// the initial sync's scratch, reused from one Service to the next).
func (r *Reconciler) claimInto(won *frontendSet, id model.ServiceID, wanted []model.Frontend, applied frontendKeys) (changed []model.ServiceID) {
	*won = frontendSet{list: won.list[:0]}
	o := &r.owners
	want := newSmallSet(wanted)
	// Let go of what id no longer wants: contended frontends first...
	for fe, ids := range o.contenders {
		if !want.has(fe) && slices.Contains(ids, id) {
			changed = append(changed, r.release(fe, id)...)
		}
	}
	// ... then frontends id owned alone.
	for _, k := range applied {
		if owner, ok := o.ownerOf(k); ok && owner == id && !want.has(frontendOf(k)) {
			delete(o.of, k)
		}
	}
	var ref *model.ServiceID // id's, made once
	for _, fe := range wanted {
		owner, ok := o.owner(fe)
		if !ok || owner == id {
			if ref == nil {
				ref = r.idRef(id)
			}
			o.of[ownerKey(fe)] = ref
			won.add(fe)
			continue
		}
		ids := o.contenders[fe]
		if len(ids) == 0 {
			ids = []model.ServiceID{owner}
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
		o.contenders[fe] = ids
		if best := r.first(ids); best == id {
			if ref == nil {
				ref = r.idRef(id)
			}
			o.of[ownerKey(fe)] = ref
			won.add(fe)
			changed = append(changed, others(ids, id)...)
		}
	}
	return changed
}

// release drops id from fe's contenders; if id owned fe, the next in order
// takes it over. It returns the Services to sync again. r.mu is held.
func (r *Reconciler) release(fe model.Frontend, id model.ServiceID) []model.ServiceID {
	o := &r.owners
	ids := others(o.contenders[fe], id)
	if len(ids) <= 1 {
		delete(o.contenders, fe)
	} else {
		o.contenders[fe] = ids
	}
	if owner, ok := o.owner(fe); ok && owner == id {
		o.of[ownerKey(fe)] = r.idRef(r.first(ids))
	}
	return ids
}

// first is the Service that owns a frontend all of ids claim. r.mu is held.
func (r *Reconciler) first(ids []model.ServiceID) model.ServiceID {
	return slices.MinFunc(ids, func(a, b model.ServiceID) int {
		return cmp.Or(cmp.Compare(r.age(a), r.age(b)), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// age orders Services by creation: older first, unknown last.
func (r *Reconciler) age(id model.ServiceID) int64 {
	if st := r.existing(id); st != nil && st.svc != nil && st.svc.Created > 0 {
		return st.svc.Created
	}
	return 1 << 62
}

// frontendSet is a set of frontends: a slice while small. A Service has a
// handful of frontends, and a full sync builds these sets for every
// Service, where maps were a fifth of its garbage.
type frontendSet = smallSet[model.Frontend]

// newFrontendSet returns an empty set with room for n frontends.
func newFrontendSet(n int) frontendSet {
	if n <= smallSetMax {
		return frontendSet{list: make([]model.Frontend, 0, n)}
	}
	return frontendSet{m: make(map[model.Frontend]bool, n)}
}

func others(ids []model.ServiceID, id model.ServiceID) []model.ServiceID {
	out := make([]model.ServiceID, 0, len(ids))
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// reportConflicts reports the frontends id wants but another Service owns
// (or clears the report). r.mu is held.
func (r *Reconciler) reportConflicts(id model.ServiceID, wanted []model.Frontend, won *frontendSet) {
	var lost []string
	for _, fe := range wanted {
		if !won.has(fe) {
			lost = append(lost, fmt.Sprintf("%s is also claimed by Service %s, which is programmed (created earlier, or first by name)", fe, r.ownerName(fe)))
		}
	}
	slices.Sort(lost)
	lost = slices.Compact(lost)
	obj := report.Object{Kind: "Service", Namespace: id.Namespace, Name: id.Name}
	r.report.Set(obj, report.FrontendConflict, strings.Join(lost, "; "))
}

// frontendsOf lists fs's frontends.
func frontendsOf(fs model.Frontends) []model.Frontend {
	return appendFrontendsOf(make([]model.Frontend, 0, len(fs)), fs)
}

// appendFrontendsOf appends fs's frontends to out.
func appendFrontendsOf(out []model.Frontend, fs model.Frontends) []model.Frontend {
	for _, f := range fs {
		out = append(out, f.Frontend)
	}
	return out
}
