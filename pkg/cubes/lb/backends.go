package lb

import (
	"slices"

	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// acquireAll returns the ids of the (distinct) backends bs. A frontend holds
// one reference per backend in its slots, so a reference is taken only for a
// backend not already among held; new backends are written to the map. The
// references taken are returned for the caller to release if it cannot finish
// (for a frontend holding none, that is ids itself).
func (c *Tables) acquireAll(proto model.Proto, bs []model.Backend, held []uint32) (ids, acquired []uint32, err error) {
	holding := newSmallSet[uint32](held)
	// A backend listed twice has the same key, so the same id: duplicates
	// are found among the ids taken so far (in ids itself while they are
	// few), not in a set of backends, which a full sync built as garbage
	// for every frontend.
	var taken map[uint32]bool
	if len(bs) > smallSetMax {
		taken = make(map[uint32]bool, len(bs))
	}
	dup := func(id uint32) bool {
		if taken != nil {
			return taken[id]
		}
		return slices.Contains(ids, id)
	}
	take := func(id uint32) {
		ids = append(ids, id)
		if taken != nil {
			taken[id] = true
		}
	}
	ids = make([]uint32, 0, len(bs))
	for _, b := range bs {
		k := backendKey(b, proto)
		have := c.backends.get(k)
		if have != nil && dup(have.id) {
			continue
		}
		if have != nil && holding.has(have.id) {
			take(have.id)
			continue
		}
		id, err := c.acquire(k)
		if err != nil {
			if len(held) == 0 {
				acquired = ids
			}
			c.releaseAll(acquired)
			return nil, nil, err
		}
		if len(held) > 0 {
			acquired = append(acquired, id)
		}
		take(id)
	}
	if len(held) == 0 {
		acquired = ids // a new frontend holds nothing: every id was acquired
	}
	return ids, acquired, nil
}

// backendKey is b as lb_backends stores it, which is also how the cube
// indexes it.
func backendKey(b model.Backend, proto model.Proto) datapath.Backend {
	return datapath.Backend{Addr: datapath.AddrFrom(b.Addr), Port: datapath.Port(b.Port), Proto: uint8(proto)}
}

func backendOf(k datapath.Backend) model.Backend {
	return model.Backend{Addr: k.Addr.IP(), Port: datapath.HostPort(k.Port)}
}

// backendByID is the backend with id (that of the zero key if none).
func (c *Tables) backendByID(id uint32) model.Backend {
	var k datapath.Backend
	if b := c.backends.getID(id); b != nil {
		k = c.backends.keyOf(b)
	}
	return backendOf(k)
}

func (c *Tables) acquire(k datapath.Backend) (uint32, error) {
	if b := c.backends.get(k); b != nil {
		if b.refs == 0 {
			c.unretire(b.id)
		}
		b.refs++
		return b.id, nil
	}
	id := c.nextBackendID
	if err := c.writeBackend(id, k); err != nil {
		return 0, err
	}
	c.nextBackendID++
	c.backends.add(k, id, 1)
	return id, nil
}

// releaseAll drops one reference per id; a backend nobody uses is retired
// (retired.go) or deleted.
func (c *Tables) releaseAll(ids []uint32) {
	for _, id := range ids {
		b := c.backends.getID(id)
		if b == nil {
			continue
		}
		if b.refs > 1 {
			b.refs--
			continue
		}
		if c.retire(b) {
			continue
		}
		// A failed delete is tried again (leftovers); meanwhile the entry
		// cannot mislead the datapath: no slot points at it.
		removeOrRetry(c, MapBackends, id)
		c.backends.remove(id)
	}
}

// smallSet is a set that stays a slice while small: most Services have a
// few backends, and a full sync builds these sets for every frontend, where
// maps were a third of the allocations.
type smallSet[T comparable] struct {
	list []T
	m    map[T]bool
}

const smallSetMax = 16

// newSmallSet makes a set of items, which it does not copy: only sets made
// from nil may be added to.
func newSmallSet[T comparable](items []T) smallSet[T] {
	var s smallSet[T]
	if len(items) > smallSetMax {
		s.m = make(map[T]bool, len(items))
		for _, x := range items {
			s.m[x] = true
		}
		return s
	}
	s.list = items
	return s
}

func (s *smallSet[T]) has(x T) bool {
	if s.m != nil {
		return s.m[x]
	}
	return slices.Contains(s.list, x)
}

// add adds x and says whether it was new.
func (s *smallSet[T]) add(x T) bool {
	if s.has(x) {
		return false
	}
	if s.m == nil && len(s.list) < smallSetMax {
		s.list = append(s.list, x)
		return true
	}
	if s.m == nil {
		s.m = make(map[T]bool, 2*smallSetMax)
		for _, y := range s.list {
			s.m[y] = true
		}
	}
	s.m[x] = true
	return true
}
