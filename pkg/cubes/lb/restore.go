package lb

import (
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Restore returns a cube whose view is rebuilt from maps that an earlier
// agent left pinned, so that reconciling the desired state afterwards writes
// only the differences and established flows keep their backends. Leftovers
// of an update interrupted mid-way (slots beyond a master's count, backends
// no slot uses) are removed.
func Restore(maps *cube.Maps) (*Tables, error) {
	c := New(maps)

	// Read first, then indexed in a map and a table sized once: a million
	// backends grown into them entry by entry rehashed both many times.
	var ids []uint32
	var bs []datapath.Backend
	err := cube.Each(maps, MapBackends, func(id uint32, b datapath.Backend) bool {
		ids, bs = append(ids, id), append(bs, b)
		c.nextBackendID = max(c.nextBackendID, id+1)
		return true
	})
	if err != nil {
		return nil, err
	}
	backends := make(map[uint32]datapath.Backend, len(ids))
	for i, id := range ids {
		backends[id] = bs[i]
	}
	ids, bs = nil, nil
	c.backends.reserve(len(backends))

	type slotEntry struct {
		key datapath.ServiceKey
		id  uint32
	}
	masters := map[datapath.ServiceKey]datapath.ServiceValue{}
	var slots []slotEntry
	err = cube.Each(maps, MapServices, func(key datapath.ServiceKey, val datapath.ServiceValue) bool {
		if key.Slot == 0 {
			masters[key] = val
			c.nextRevNATID = max(c.nextRevNATID, val.RevNatId+1)
		} else {
			slots = append(slots, slotEntry{key, val.BackendId})
		}
		return true
	})
	if err != nil {
		return nil, err
	}

	for k, m := range masters {
		c.frontends[k] = &frontend{revNATID: m.RevNatId, flags: modelFlags(m.Flags), affinity: m.BackendId, slots: make([]uint32, m.Count)}
	}
	for _, s := range slots {
		master := s.key
		master.Slot = 0
		f := c.frontends[master]
		_, known := backends[s.id]
		if f == nil || int(s.key.Slot) > len(f.slots) || !known {
			if err := c.deleteService(s.key); err != nil {
				return nil, err
			}
			continue
		}
		f.slots[s.key.Slot-1] = s.id
	}
	for k, f := range c.frontends {
		for i, id := range f.slots {
			if id == 0 { // master counted a slot that was never written
				f.slots = f.slots[:i]
				master := datapath.ServiceValue{Count: uint16(i), RevNatId: f.revNATID, Flags: bpfFlags(f.flags), BackendId: f.affinity}
				if err := c.writeService(k, master); err != nil {
					return nil, err
				}
				break
			}
			b := backends[id]
			b.Flags = 0 // the index is by address, port and protocol
			ref := c.backends.get(b)
			switch {
			case ref == nil:
				c.backends.add(b, id, 0)
				ref = c.backends.get(b)
			case ref.id != id:
				// The same backend under two ids (not written by this
				// version): point the slot at the first; the other id is
				// then unused, and deleted below.
				slot := k
				slot.Slot = uint16(i + 1)
				if err := c.writeService(slot, datapath.ServiceValue{BackendId: ref.id}); err != nil {
					return nil, err
				}
				f.slots[i] = ref.id
			}
			ref.refs++
		}
	}
	// Backends no slot names may be a terminating endpoint's, which
	// established flows still use: they are kept, unreferenced, until the
	// first sync has said which are draining (ReleaseUnclaimed). A second
	// id for a backend already indexed is deleted now.
	for id, b := range backends {
		if c.backends.getID(id) != nil {
			continue
		}
		b.Flags = 0
		if c.backends.get(b) != nil {
			if err := c.deleteID(MapBackends, id); err != nil {
				return nil, err
			}
			continue
		}
		c.backends.add(b, id, 0)
		c.unclaimed = append(c.unclaimed, id)
	}
	if err := c.removeRetiredList(); err != nil {
		return nil, err
	}
	if err := c.removeStaleAffinityMatch(); err != nil {
		return nil, err
	}
	if err := c.removeStaleMaglevTables(); err != nil {
		return nil, err
	}
	if err := c.restoreRanges(); err != nil {
		return nil, err
	}
	if err := c.restoreVIPs(); err != nil {
		return nil, err
	}
	return c, c.removeOrphanRevNAT()
}

// removeOrphanRevNAT deletes revNAT entries no master refers to (a frontend
// whose creation or deletion was interrupted).
func (c *Tables) removeOrphanRevNAT() error {
	used := map[uint32]bool{}
	for _, f := range c.frontends {
		used[f.revNATID] = true
	}
	return sweep(c, MapRevNAT, func(id uint32, _ datapath.Frontend) bool {
		c.nextRevNATID = max(c.nextRevNATID, id+1)
		return used[id]
	})
}

// sweep reads every entry of the named map after a restore and deletes
// those keep does not want (keep may also take note of the others).
func sweep[K, V any](c *Tables, name string, keep func(K, V) bool) error {
	var stale []K
	err := cube.Each(c.maps, name, func(k K, v V) bool {
		if !keep(k, v) {
			stale = append(stale, k)
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, k := range stale {
		c.ops.Deletes++
		if err := cube.Remove(c.maps, name, k); err != nil {
			return err
		}
	}
	return nil
}

func frontendOf(k datapath.ServiceKey) model.Frontend {
	return model.Frontend{Addr: k.Addr.IP(), Port: datapath.HostPort(k.Port), Proto: model.Proto(k.Proto), Internal: k.Scope == datapath.ScopeInternal}
}
