package router

import (
	"fmt"
	"net/netip"
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
	if err := converge(e.maps, MapSources, sources); err != nil {
		return err
	}
	return converge(e.maps, MapEndpoints, eps)
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
