package lb

// lb_announce: the LoadBalancer IPs this node answers ARP and IPv6
// neighbour solicitations for on its uplinks (bpf/cubes/lb/announce.h),
// so that a host on the underlay reaches them with no route. A frontend
// with the Announce flag holds a reference on its address, as ClusterIPs
// do in lb_vips: the first writes one entry per uplink, the last one's
// release deletes them.

import (
	"fmt"
	"net"
	"slices"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// Uplink is an interface the node answers on, and the MAC it answers with.
type Uplink struct {
	Name    string
	Ifindex uint32
	MAC     [6]byte
}

// HardwareAddr is the uplink's MAC as the net package spells it.
func (u Uplink) HardwareAddr() net.HardwareAddr { return net.HardwareAddr(u.MAC[:]) }

// UplinksByName resolves the node's uplinks; one without an Ethernet
// address (a tunnel) cannot be asked, and is left out.
func UplinksByName(names []string) ([]Uplink, error) {
	var out []Uplink
	for _, n := range names {
		ifc, err := net.InterfaceByName(n)
		if err != nil {
			return nil, fmt.Errorf("uplink %s: %w", n, err)
		}
		if len(ifc.HardwareAddr) != 6 {
			continue
		}
		u := Uplink{Name: ifc.Name, Ifindex: uint32(ifc.Index)}
		copy(u.MAC[:], ifc.HardwareAddr)
		out = append(out, u)
	}
	return out, nil
}

func wantsAnnounce(flags model.FrontendFlags) bool { return flags&model.Announce != 0 }

// SetUplinks says where to answer, and makes lb_announce hold exactly the
// announced addresses on those uplinks: the frontends' references are
// counted (after a restore, from their flags), an entry for another
// interface or address goes, a missing one is written. lb_uplinks comes
// to hold exactly these uplinks' MACs, for XDP to tell the frames
// addressed to this host from those flooded to another's.
func (c *Tables) SetUplinks(ups []Uplink) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.uplinks = ups
	listed := map[uint32]bool{}
	if err := sweep(c, MapUplinks, func(ifindex uint32, v datapath.Uplink) bool {
		listed[ifindex] = slices.ContainsFunc(ups, func(u Uplink) bool { return u.Ifindex == ifindex && u.MAC == v.Mac })
		return listed[ifindex]
	}); err != nil {
		return err
	}
	for _, u := range ups {
		if listed[u.Ifindex] {
			continue
		}
		c.ops.Updates++
		if err := cube.Put(c.maps, MapUplinks, u.Ifindex, datapath.Uplink{Mac: u.MAC}); err != nil {
			return fmt.Errorf("%s: %w", MapUplinks, err)
		}
	}
	c.announced = map[datapath.Addr]uint32{}
	for k, f := range c.frontends {
		f.announce = wantsAnnounce(f.flags)
		if f.announce {
			c.announced[k.Addr]++
		}
	}
	want := map[datapath.AnnounceKey]bool{}
	for a := range c.announced {
		for _, u := range ups {
			want[datapath.AnnounceKey{Ifindex: u.Ifindex, Addr: a}] = true
		}
	}
	present := map[datapath.AnnounceKey]bool{}
	if err := sweep(c, MapAnnounce, func(k datapath.AnnounceKey, v datapath.AnnounceValue) bool {
		present[k] = true
		return want[k] && v.Mac == c.macOf(k.Ifindex)
	}); err != nil {
		return err
	}
	for a := range c.announced {
		if err := c.writeAnnounce(a, func(k datapath.AnnounceKey) bool { return !present[k] }); err != nil {
			return fmt.Errorf("restore %s: %w", MapAnnounce, err)
		}
	}
	return nil
}

func (c *Tables) macOf(ifindex uint32) [6]uint8 {
	for _, u := range c.uplinks {
		if u.Ifindex == ifindex {
			return u.MAC
		}
	}
	return [6]uint8{}
}

// holdAnnounce makes f hold (want) or not hold a reference on its address
// in lb_announce. Taking one can fail (a full map); releasing cannot (a
// failed delete is retried later). c.mu is held.
func (c *Tables) holdAnnounce(addr datapath.Addr, f *frontend, want bool) error {
	switch {
	case want == f.announce:
		return nil
	case want:
		if c.announced[addr] == 0 {
			if err := c.writeAnnounce(addr, nil); err != nil {
				return err
			}
		}
		c.announced[addr]++
	default:
		c.announced[addr]--
		if c.announced[addr] == 0 {
			delete(c.announced, addr)
			for _, u := range c.uplinks {
				removeOrRetry(c, MapAnnounce, datapath.AnnounceKey{Ifindex: u.Ifindex, Addr: addr})
			}
		}
	}
	f.announce = want
	return nil
}

// writeAnnounce lists addr on every uplink (only where missing says, if
// set).
func (c *Tables) writeAnnounce(addr datapath.Addr, missing func(datapath.AnnounceKey) bool) error {
	for _, u := range c.uplinks {
		k := datapath.AnnounceKey{Ifindex: u.Ifindex, Addr: addr}
		if missing != nil && !missing(k) {
			continue
		}
		c.ops.Updates++
		if err := cube.Put(c.maps, MapAnnounce, k, datapath.AnnounceValue{Mac: u.MAC}); err != nil {
			return err
		}
	}
	return nil
}
