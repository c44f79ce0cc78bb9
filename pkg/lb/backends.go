package lb

import (
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

// acquireAll returns the ids of the (distinct) backends bs. A frontend holds
// one reference per backend in its slots, so a reference is taken only for a
// backend not already among held; new backends are written to the map. The
// references taken are returned for the caller to release if it cannot finish.
func (c *Cube) acquireAll(proto model.Proto, bs []model.Backend, held []uint32) (ids, acquired []uint32, err error) {
	holding := make(map[uint32]bool, len(held))
	for _, id := range held {
		holding[id] = true
	}
	seen := make(map[model.Backend]bool, len(bs))
	for _, b := range bs {
		if seen[b] {
			continue
		}
		seen[b] = true
		k := backendKey{b, proto}
		if have := c.backends[k]; have != nil && holding[have.id] {
			ids = append(ids, have.id)
			continue
		}
		id, err := c.acquire(k)
		if err != nil {
			c.releaseAll(acquired)
			return nil, nil, err
		}
		acquired = append(acquired, id)
		ids = append(ids, id)
	}
	return ids, acquired, nil
}

func (c *Cube) acquire(k backendKey) (uint32, error) {
	if b := c.backends[k]; b != nil {
		b.refs++
		return b.id, nil
	}
	id := c.nextBackendID
	v := datapath.Backend{Addr: datapath.AddrFrom(k.Addr), Port: datapath.Port(k.Port), Proto: uint8(k.proto)}
	if err := c.writeBackend(id, v); err != nil {
		return 0, err
	}
	c.nextBackendID++
	c.backends[k] = &backend{id: id, refs: 1}
	c.byID[id] = k
	return id, nil
}

// releaseAll drops one reference per id; a backend nobody uses is deleted.
func (c *Cube) releaseAll(ids []uint32) {
	for _, id := range ids {
		k, ok := c.byID[id]
		if !ok {
			continue
		}
		b := c.backends[k]
		if b.refs--; b.refs > 0 {
			continue
		}
		// A failed delete leaves an unreferenced entry that the next restore
		// removes; it cannot mislead the datapath (no slot points at it).
		_ = c.deleteID(datapath.MapBackends, id)
		delete(c.backends, k)
		delete(c.byID, id)
	}
}
