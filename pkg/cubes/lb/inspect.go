package lb

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Programmed is one frontend as the datapath holds it now: what `netcube
// service list` prints, read from the pinned maps (the agent may be down).
type Programmed struct {
	Frontend string `json:"frontend"` // address:port/protocol
	ID       uint32 `json:"id"`       // its revNAT id (monitor events name it)
	// Service is the Service that owns the frontend, as the agent says
	// ("" when no agent answered).
	Service string   `json:"service,omitempty"`
	Flags   []string `json:"flags,omitempty"` // external, local, maglev, source-ranges
	// AffinitySeconds is the ClientIP session affinity timeout (0: none).
	AffinitySeconds uint32 `json:"affinity_seconds,omitempty"`
	// Backends are those new flows may get, in slot order; with none, new
	// flows are refused (dropped with local).
	Backends []ProgrammedBackend `json:"backends"`
}

// ProgrammedBackend is a backend of a frontend and its weight: the slots
// it holds (each slot is an equal share of new flows without Maglev).
type ProgrammedBackend struct {
	Addr  string `json:"address"`
	ID    uint32 `json:"id"`
	Slots int    `json:"slots"`
}

var flagNames = []struct {
	f    datapath.ServiceFlags
	name string
}{{datapath.ServiceExternal, "external"}, {datapath.ServiceLocal, "local"}, {datapath.ServiceMaglev, "maglev"}, {datapath.ServiceSourceRanges, "source-ranges"}}

// Inspect reads every frontend of the maps, sorted by address, port and
// protocol. A read that raced with the agent is retried (Dump).
func Inspect(maps *cube.Maps) ([]Programmed, error) {
	var err error
	for range 20 {
		var out []Programmed
		if out, err = inspect(maps); err == nil {
			return out, nil
		}
	}
	return nil, err
}

func inspect(maps *cube.Maps) ([]Programmed, error) {
	backends := map[uint32]datapath.Backend{}
	err := cube.Each(maps, MapBackends, func(id uint32, b datapath.Backend) bool {
		backends[id] = b
		return true
	})
	if err != nil {
		return nil, err
	}
	masters := map[model.Frontend]datapath.ServiceValue{}
	slots := map[model.Frontend]map[uint16]uint32{}
	err = cube.Each(maps, MapServices, func(key datapath.ServiceKey, val datapath.ServiceValue) bool {
		fe := frontendOf(key)
		if key.Slot == 0 {
			masters[fe] = val
			return true
		}
		if slots[fe] == nil {
			slots[fe] = map[uint16]uint32{}
		}
		slots[fe][key.Slot] = val.BackendId
		return true
	})
	if err != nil {
		return nil, err
	}
	fes := make([]model.Frontend, 0, len(masters))
	for fe := range masters {
		fes = append(fes, fe)
	}
	slices.SortFunc(fes, func(a, b model.Frontend) int {
		return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Proto, b.Proto))
	})
	out := make([]Programmed, 0, len(fes))
	for _, fe := range fes {
		m := masters[fe]
		p := Programmed{Frontend: fe.String(), ID: m.RevNatId, AffinitySeconds: m.BackendId, Backends: []ProgrammedBackend{}}
		for _, f := range flagNames {
			if m.Flags&f.f != 0 {
				p.Flags = append(p.Flags, f.name)
			}
		}
		at := map[uint32]int{}
		for s := uint16(1); s <= m.Count; s++ {
			bid, ok := slots[fe][s]
			b, found := backends[bid]
			if !ok || !found {
				return nil, errRaced
			}
			if i, seen := at[bid]; seen {
				p.Backends[i].Slots++
				continue
			}
			at[bid] = len(p.Backends)
			addr := model.Backend{Addr: b.Addr.IP(), Port: datapath.HostPort(b.Port)}
			p.Backends = append(p.Backends, ProgrammedBackend{Addr: addr.String(), ID: bid, Slots: 1})
		}
		out = append(out, p)
	}
	return out, nil
}

var errRaced = errors.New("a slot names a backend not read yet (the agent wrote meanwhile)")

// ServicesPath is where the agent's local API says which Service owns
// each frontend: {"10.96.0.10:80/TCP": "default/echo", ...}.
const ServicesPath = "/v1/services"

// ownersHandler serves the frontends' owners.
func (r *Reconciler) ownersHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		out := make(map[string]string, len(r.owners.of))
		for k, id := range r.owners.of {
			out[frontendOf(k).String()] = id.String()
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// ServiceAt names the Service that owns frontend fe (cube.ServiceNamer).
func (r *Reconciler) ServiceAt(fe model.Frontend) (model.ServiceID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owners.owner(fe)
}

// serviceNames names Services for the datapath's events
// (cube.ServiceNamer).
type serviceNames struct {
	rec  *Reconciler
	maps *cube.Maps
}

func (n serviceNames) ServiceAt(fe model.Frontend) (model.ServiceID, bool) {
	return n.rec.ServiceAt(fe)
}

// ServiceByRevNAT names the Service of the frontend whose revNAT id the
// events carry: the frontend from the datapath's lb_revnat, its owner by
// any protocol.
func (n serviceNames) ServiceByRevNAT(revNAT uint32) (model.ServiceID, bool) {
	var f datapath.Frontend
	if err := n.maps.Map(MapRevNAT).Lookup(revNAT, &f); err != nil {
		return model.ServiceID{}, false
	}
	for _, p := range []model.Proto{model.TCP, model.UDP, model.SCTP} {
		if id, ok := n.rec.ServiceAt(model.Frontend{Addr: f.Addr.IP(), Port: datapath.HostPort(f.Port), Proto: p}); ok {
			return id, true
		}
	}
	return model.ServiceID{}, false
}
