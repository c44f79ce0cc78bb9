package lb

import (
	"fmt"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Dump reads the frontends and their backends (in slot order) from the maps
// without changing them: what a packet would see now. The two maps cannot be
// read at one instant; a read that raced with the agent (a slot naming a
// backend written after the backends were read) is retried.
func Dump(maps *cube.Maps) (map[model.Frontend][]model.Backend, error) {
	var err error
	for range 20 {
		var out map[model.Frontend][]model.Backend
		if out, err = dump(maps); err == nil {
			return out, nil
		}
	}
	return nil, err
}

func dump(maps *cube.Maps) (map[model.Frontend][]model.Backend, error) {
	backends := map[uint32]model.Backend{}
	err := cube.Each(maps, MapBackends, func(id uint32, b datapath.Backend) bool {
		backends[id] = model.Backend{Addr: b.Addr.IP(), Port: datapath.HostPort(b.Port)}
		return true
	})
	if err != nil {
		return nil, err
	}
	masters := map[model.Frontend]uint16{}
	slots := map[model.Frontend]map[uint16]uint32{}
	err = cube.Each(maps, MapServices, func(key datapath.ServiceKey, val datapath.ServiceValue) bool {
		fe := frontendOf(key)
		if key.Slot == 0 {
			masters[fe] = val.Count
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
	out := map[model.Frontend][]model.Backend{}
	for fe, count := range masters {
		var bs []model.Backend
		for s := uint16(1); s <= count; s++ {
			b, ok := backends[slots[fe][s]]
			if !ok {
				return nil, fmt.Errorf("%s: slot %d has no backend", fe, s)
			}
			bs = append(bs, b)
		}
		out[fe] = bs
	}
	return out, nil
}

// Lookup reads one frontend's backends as a packet would find them (master
// entry, slots, backends), without changing anything. ok is false when the
// frontend is not programmed.
func Lookup(maps *cube.Maps, fe model.Frontend) (bs []model.Backend, ok bool, err error) {
	var master datapath.ServiceValue
	if err := maps.Map(MapServices).Lookup(serviceKey(fe, 0), &master); err != nil {
		return nil, false, nil
	}
	for s := 1; s <= int(master.Count); s++ {
		var slot datapath.ServiceValue
		var b datapath.Backend
		if err := maps.Map(MapServices).Lookup(serviceKey(fe, s), &slot); err != nil {
			return nil, true, fmt.Errorf("%s slot %d: %w", fe, s, err)
		}
		if err := maps.Map(MapBackends).Lookup(slot.BackendId, &b); err != nil {
			return nil, true, fmt.Errorf("%s slot %d backend %d: %w", fe, s, slot.BackendId, err)
		}
		bs = append(bs, model.Backend{Addr: b.Addr.IP(), Port: datapath.HostPort(b.Port)})
	}
	return bs, true, nil
}

// Flags reads one frontend's options as a packet would find them in its
// master entry; ok is false when the frontend is not programmed.
func Flags(maps *cube.Maps, fe model.Frontend) (flags model.FrontendFlags, ok bool) {
	var master datapath.ServiceValue
	if err := maps.Map(MapServices).Lookup(serviceKey(fe, 0), &master); err != nil {
		return 0, false
	}
	return modelFlags(master.Flags), true
}
