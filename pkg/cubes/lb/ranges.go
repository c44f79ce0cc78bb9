package lb

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// loadBalancerSourceRanges: a frontend flagged SourceRanges admits only
// clients within its ranges, which lb_source_ranges holds under its revNAT
// id. The cube remembers them (c.ranges) only for frontends that have some.

func rangeKey(revNATID uint32, p netip.Prefix) datapath.SourceRangeKey {
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96 // stored as ::ffff:a.b.c.d
	}
	return datapath.SourceRangeKey{Prefixlen: uint32(32 + bits), RevNatId: revNATID, Addr: datapath.AddrFrom(p.Masked().Addr())}
}

// writeRanges adds the ranges a frontend did not have yet (all of them,
// after a failed update); c.mu is held.
func (c *Tables) writeRanges(revNATID uint32, ranges []netip.Prefix, all bool) error {
	have := c.ranges[revNATID]
	for _, p := range ranges {
		if !all && slices.Contains(have, p) {
			continue
		}
		c.ops.Updates++
		if err := cube.Put(c.maps, MapSourceRanges, rangeKey(revNATID, p), uint8(1)); err != nil {
			return fmt.Errorf("source range %s: %w", p, err)
		}
	}
	return nil
}

// keepRanges removes the ranges a frontend no longer has (all, for nil),
// once its master entry no longer needs them; c.mu is held.
func (c *Tables) keepRanges(revNATID uint32, ranges []netip.Prefix) {
	for _, p := range c.ranges[revNATID] {
		if !slices.Contains(ranges, p) {
			removeOrRetry(c, MapSourceRanges, rangeKey(revNATID, p))
		}
	}
	if len(ranges) == 0 {
		delete(c.ranges, revNATID)
	} else {
		c.ranges[revNATID] = slices.Clone(ranges)
	}
}

// restoreRanges reads the ranges back after a restart, dropping those of
// frontends that are gone.
func (c *Tables) restoreRanges() error {
	live := map[uint32]bool{}
	for _, f := range c.frontends {
		live[f.revNATID] = true
	}
	return sweep(c, MapSourceRanges, func(k datapath.SourceRangeKey, _ uint8) bool {
		if !live[k.RevNatId] {
			return false
		}
		bits := int(k.Prefixlen) - 32
		addr := k.Addr.IP()
		if addr.Is4() {
			bits -= 96
		}
		c.ranges[k.RevNatId] = append(c.ranges[k.RevNatId], netip.PrefixFrom(addr, bits))
		return true
	})
}
