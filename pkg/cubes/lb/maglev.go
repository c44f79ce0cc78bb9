package lb

import (
	"hash/fnv"
	"slices"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/model"
)

// maglevTable computes Maglev's lookup table (Eisenbud et al., "Maglev: A
// Fast and Reliable Software Network Load Balancer", NSDI 2016, §3.4):
// each backend has its own permutation of the m entries (an offset and a
// skip from two hashes of its name), and the backends take turns claiming
// the next entry of their permutation still free, until all are taken.
// Every backend gets m/n entries or one more, and removing one backend
// moves little more than its own entries. Names, not ids, are hashed, so
// every node computes the same table. It returns, per entry, an index into
// names (which must be distinct and non-empty); m must be prime.
func maglevTable(names []string, m int) []int {
	n := len(names)
	offset, skip, next := make([]int, n), make([]int, n), make([]int, n)
	for i, name := range names {
		offset[i] = int(hash64(name, "offset") % uint64(m))
		skip[i] = int(hash64(name, "skip")%uint64(m-1)) + 1
	}
	table := make([]int, m)
	for i := range table {
		table[i] = -1
	}
	for filled := 0; ; {
		for i := range n {
			c := (offset[i] + next[i]*skip[i]) % m
			for table[c] >= 0 {
				next[i]++
				c = (offset[i] + next[i]*skip[i]) % m
			}
			table[c] = i
			next[i]++
			if filled++; filled == m {
				return table
			}
		}
	}
}

func hash64(name, salt string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(salt))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return h.Sum64()
}

// writeMaglevTable computes and installs the table of a Maglev frontend
// over its slots' backends; c.mu is held.
func (c *Tables) writeMaglevTable(revNATID uint32, slots []uint32) error {
	if len(slots) == 0 {
		c.ops.Deletes++ // no backends: refused before any lookup
		return cube.Remove(c.maps, MapMaglev, revNATID)
	}
	type named struct {
		name string
		id   uint32
	}
	backends := make([]named, 0, len(slots))
	for _, id := range slots {
		backends = append(backends, named{c.backendByID(id).String(), id})
	}
	slices.SortFunc(backends, func(a, b named) int { return cmpString(a.name, b.name) })
	backends = slices.CompactFunc(backends, func(a, b named) bool { return a.name == b.name })
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = b.name
	}
	// The table's size is the object's (MAGLEV_M), read from the map.
	size := int(c.maps.Map(MapMaglev).InnerMaxEntries())
	table := make([]uint32, size)
	for i, b := range maglevTable(names, size) {
		table[i] = backends[b].id
	}
	c.ops.Updates++
	// A new inner map, filled before it is put in lb_maglev: a packet
	// sees the old table or the new one, never a mix.
	return c.maps.ReplaceInner(MapMaglev, revNATID, table)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sameIDs says whether a and b hold the same ids (slot lists: no repeats).
func sameIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	in := newSmallSet(b)
	for _, x := range a {
		if !in.has(x) {
			return false
		}
	}
	return true
}

func isMaglev(f model.FrontendFlags) bool { return f&model.Maglev != 0 }

// removeStaleMaglevTables deletes, after a restore, the tables of frontends
// that are gone or no longer use Maglev.
func (c *Tables) removeStaleMaglevTables() error {
	want := map[uint32]bool{}
	for _, f := range c.frontends {
		if isMaglev(f.flags) {
			want[f.revNATID] = true
		}
	}
	return sweep(c, MapMaglev, func(id, _ uint32) bool { return want[id] })
}
