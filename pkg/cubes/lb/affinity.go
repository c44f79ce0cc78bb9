package lb

import (
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// Session affinity: for a frontend with affinity, lb_affinity_match holds
// {backend, revNAT id} for each of its backends, so the datapath only keeps
// a client on a backend the Service still has. Frontends without affinity
// have no entries.

// writeAffinityMatch adds the entries of ids (the new slots) that prev (the
// old slots, under the old affinity) did not have.
func (c *Tables) writeAffinityMatch(revNAT, affinity uint32, ids []uint32, prevAffinity uint32, prev []uint32) error {
	if affinity == 0 {
		return nil
	}
	had := newSmallSet(prev)
	for _, id := range ids {
		if prevAffinity != 0 && had.has(id) {
			continue
		}
		c.ops.Updates++
		if err := cube.Put(c.maps, MapAffinityMatch, datapath.AffinityMatchKey{BackendId: id, RevNatId: revNAT}, uint8(1)); err != nil {
			return err
		}
	}
	return nil
}

// deleteAffinityMatch removes the entries of prev (old slots, old affinity)
// that ids (new slots, new affinity) no longer have. A failed delete is
// tried again (leftovers).
func (c *Tables) deleteAffinityMatch(revNAT, prevAffinity uint32, prev []uint32, affinity uint32, ids []uint32) {
	if prevAffinity == 0 {
		return
	}
	keep := newSmallSet(ids)
	for _, id := range prev {
		if affinity != 0 && keep.has(id) {
			continue
		}
		removeOrRetry(c, MapAffinityMatch, datapath.AffinityMatchKey{BackendId: id, RevNatId: revNAT})
	}
}

// removeStaleAffinityMatch deletes, after a restore, entries that are not
// a backend of a frontend with affinity (an update interrupted midway).
func (c *Tables) removeStaleAffinityMatch() error {
	want := map[datapath.AffinityMatchKey]bool{}
	for _, f := range c.frontends {
		if f.affinity == 0 {
			continue
		}
		for _, id := range f.slots {
			want[datapath.AffinityMatchKey{BackendId: id, RevNatId: f.revNATID}] = true
		}
	}
	return sweep(c, MapAffinityMatch, func(k datapath.AffinityMatchKey, _ uint8) bool { return want[k] })
}
