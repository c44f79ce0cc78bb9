package model

import (
	"sync"
	"sync/atomic"
)

// placements interns the Placements of endpoints, so that each endpoint
// names its own with a 4-byte index. There are a handful per node (its
// name and hints), each kept for the life of the process.
var placements struct {
	mu      sync.Mutex           // serializes interning
	index   map[Placement]uint32 // placement -> its index in list
	current atomic.Pointer[[]*Placement]
}

// internPlacement returns p's index (0 for the zero Placement: unknown).
func internPlacement(p Placement) uint32 {
	if p == (Placement{}) {
		return 0
	}
	placements.mu.Lock()
	defer placements.mu.Unlock()
	if i, ok := placements.index[p]; ok {
		return i
	}
	if placements.index == nil {
		placements.index = map[Placement]uint32{}
		placements.current.Store(&[]*Placement{nil}) // index 0: unknown
	}
	// Readers hold a shorter slice of the same array, or an older array:
	// appending writes past what any of them reads.
	list := append(*placements.current.Load(), &p)
	i := uint32(len(list) - 1)
	placements.index[p] = i
	placements.current.Store(&list)
	return i
}

// placementAt is the placement with index i; nil for 0. It takes no lock:
// every endpoint is read far more often than a placement is added.
func placementAt(i uint32) *Placement {
	if i == 0 {
		return nil
	}
	return (*placements.current.Load())[i]
}
