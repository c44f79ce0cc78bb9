package lb

// lb_vips: the ClusterIP addresses, for the datapath's packets without
// readable ports (bpf/entry/unparsed.h): an IPv6 extension header, a later
// fragment whose first was not seen. Such a packet matches no frontend;
// to a ClusterIP it is dropped with its reason rather than handed to a
// kernel that has no route for it. Only ClusterIPs are listed (frontends
// without the External flag): a NodePort's address is the node's own, and
// an ExternalIP may be too, where the node's stack must still get its
// fragments and extension headers.

import (
	"fmt"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// isVIP says whether a frontend with these flags is a ClusterIP.
func isVIP(flags model.FrontendFlags) bool { return flags&model.External == 0 }

// holdVIP makes f hold (want) or not hold a reference on its address in
// lb_vips: the first reference writes the entry, the last one's release
// deletes it. Taking one can fail (a full map); releasing cannot (a
// failed delete is retried later, as leftovers are). c.mu is held.
func (c *Tables) holdVIP(addr datapath.Addr, f *frontend, want bool) error {
	switch {
	case want == f.vip:
		return nil
	case want:
		if c.vips[addr] == 0 {
			if err := c.writeVIP(addr); err != nil {
				return err
			}
		}
		c.vips[addr]++
	default:
		c.vips[addr]--
		if c.vips[addr] == 0 {
			delete(c.vips, addr)
			removeOrRetry(c, MapVIPs, addr)
		}
	}
	f.vip = want
	return nil
}

func (c *Tables) writeVIP(addr datapath.Addr) error {
	c.ops.Updates++
	if c.pending != nil {
		c.pending.vips.add(addr, 1)
		return nil
	}
	return cube.Put(c.maps, MapVIPs, addr, uint8(1))
}

// restoreVIPs counts the restored frontends' references and makes lb_vips
// hold exactly their addresses: an entry no ClusterIP holds goes, a
// missing one (maps of an agent that had none) is written.
func (c *Tables) restoreVIPs() error {
	for k, f := range c.frontends {
		if isVIP(f.flags) {
			f.vip = true
			c.vips[k.Addr]++
		}
	}
	present := map[datapath.Addr]bool{}
	if err := sweep(c, MapVIPs, func(a datapath.Addr, _ uint8) bool {
		present[a] = true
		return c.vips[a] > 0
	}); err != nil {
		return err
	}
	for a := range c.vips {
		if !present[a] {
			if err := c.writeVIP(a); err != nil {
				return fmt.Errorf("restore %s: %w", MapVIPs, err)
			}
		}
	}
	return nil
}
