package router

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// endpoints keeps router_endpoints and router_sources equal to this
// node's pods as the kernel has them: each pod veth (by name prefix) and its permanent
// neighbour entries (pod address -> pod MAC), which the CNI plugin made.
type endpoints struct {
	maps   *cube.Maps
	prefix string
	none   bool // kernel routing: the map stays empty
	hollow bool // maps in memory: no pod devices to read
	mu     sync.Mutex
}

var _ cube.PodHandler = (*endpoints)(nil)

func (e *endpoints) PodUp(string) error   { return e.syncAll() }
func (e *endpoints) PodDown(string) error { return e.syncAll() }

// syncAll writes every pod's entries and removes those of pods gone: a
// full pass is a few syscalls per pod, and converges whatever was missed.
// router_sources (the addresses each pod may send from) is written in
// every routing mode; router_endpoints (where to deliver) is left empty
// in the kernel's.
func (e *endpoints) syncAll() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	eps := map[datapath.Addr]datapath.RouterEndpoint{}
	var err error
	if !e.hollow {
		if eps, err = e.fromKernel(); err != nil {
			return err
		}
	}
	sources := make(map[datapath.Addr]datapath.RouterSource, len(eps))
	for a, ep := range eps {
		sources[a] = datapath.RouterSource{Ifindex: ep.Ifindex}
	}
	if e.none {
		eps = map[datapath.Addr]datapath.RouterEndpoint{}
	}
	if err := PutSources(e.maps, sources); err != nil {
		return err
	}
	return converge(e.maps, MapEndpoints, eps)
}

// PutSources makes router_sources hold exactly sources (the addresses
// each pod device may send from), and router_source_slots its layout by
// device, the source check's fast path. Idempotent.
func PutSources(m *cube.Maps, sources map[datapath.Addr]datapath.RouterSource) error {
	if err := converge(m, MapSources, maps.Clone(sources)); err != nil { // (converge takes what it writes out of want)
		return err
	}
	return convergeSlots(m, sourceSlots(sources, m.Size(MapSourceSlots)))
}

// sourceSlots lays router_sources out by device for router_source_slots
// (router_maps.h): slot ifindex % size holds the device with the lowest
// ifindex of those that share it (size: the map's, ROUTER_SOURCE_SLOTS), with its first two addresses in order
// (a device with one address holds it twice). What a slot leaves out is
// checked against router_sources alone.
func sourceSlots(sources map[datapath.Addr]datapath.RouterSource, size uint32) map[uint32]datapath.RouterSourceSlot {
	byDevice := map[uint32][]datapath.Addr{}
	for a, s := range sources {
		byDevice[s.Ifindex] = append(byDevice[s.Ifindex], a)
	}
	slots := map[uint32]datapath.RouterSourceSlot{}
	for ifindex, addrs := range byDevice {
		i := ifindex % size
		if held, ok := slots[i]; ok && held.Ifindex < ifindex {
			continue
		}
		slices.SortFunc(addrs, func(a, b datapath.Addr) int { return slices.Compare(a.W[:], b.W[:]) })
		slots[i] = datapath.RouterSourceSlot{Ifindex: ifindex, Addrs: [2]datapath.Addr{addrs[0], addrs[min(1, len(addrs)-1)]}}
	}
	return slots
}

// convergeSlots makes router_source_slots hold exactly want, every other
// slot empty: the slots taken or changed first, then those emptied (a
// pod's slot is never empty while it is rewritten).
func convergeSlots(maps *cube.Maps, want map[uint32]datapath.RouterSourceSlot) error {
	var empty []uint32
	err := cube.Each(maps, MapSourceSlots, func(i uint32, v datapath.RouterSourceSlot) bool {
		if w, ok := want[i]; ok && w == v {
			delete(want, i)
		} else if !ok && v != (datapath.RouterSourceSlot{}) {
			empty = append(empty, i)
		}
		return true
	})
	if err != nil {
		return err
	}
	for i, v := range want {
		if err := cube.Put(maps, MapSourceSlots, i, v); err != nil {
			return fmt.Errorf("%s: slot %d: %w", MapSourceSlots, i, err)
		}
	}
	for _, i := range empty {
		if err := cube.Put(maps, MapSourceSlots, i, datapath.RouterSourceSlot{}); err != nil {
			return fmt.Errorf("%s: slot %d: %w", MapSourceSlots, i, err)
		}
	}
	return nil
}

// converge makes map name hold exactly want: new and changed entries
// first (an entry is never missing while it is rewritten), then those no
// longer wanted removed.
func converge[K, V comparable](maps *cube.Maps, name string, want map[K]V) error {
	var stale []K
	err := cube.Each(maps, name, func(k K, v V) bool {
		if w, ok := want[k]; !ok {
			stale = append(stale, k)
		} else if w == v {
			delete(want, k)
		}
		return true
	})
	if err != nil {
		return err
	}
	for k, v := range want {
		if err := cube.Put(maps, name, k, v); err != nil {
			return fmt.Errorf("%s: %v: %w", name, k, err)
		}
	}
	for _, k := range stale {
		if err := cube.Remove(maps, name, k); err != nil {
			return err
		}
	}
	return nil
}

func (e *endpoints) fromKernel() (map[datapath.Addr]datapath.RouterEndpoint, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	out := map[datapath.Addr]datapath.RouterEndpoint{}
	for _, l := range links {
		if !strings.HasPrefix(l.Attrs().Name, e.prefix) {
			continue
		}
		neighs, err := netlink.NeighList(l.Attrs().Index, netlink.FAMILY_ALL)
		if err != nil {
			return nil, fmt.Errorf("neighbours of %s: %w", l.Attrs().Name, err)
		}
		for _, n := range neighs {
			a, ok := netip.AddrFromSlice(n.IP)
			if !ok || n.State&netlink.NUD_PERMANENT == 0 || len(n.HardwareAddr) != 6 || !a.IsGlobalUnicast() {
				continue
			}
			ep := datapath.RouterEndpoint{Ifindex: uint32(l.Attrs().Index)}
			copy(ep.PodMac[:], n.HardwareAddr)
			copy(ep.HostMac[:], l.Attrs().HardwareAddr)
			out[datapath.AddrFrom(a.Unmap())] = ep
		}
	}
	return out, nil
}
