package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// MaglevTableSize is the number of entries of a Maglev lookup table
// (MAGLEV_M in bpf/lib/lb.h).
const MaglevTableSize = 16381

// SetMaglevTable installs table (MaglevTableSize backend ids) as the Maglev
// lookup table of the frontend whose revNAT id is revNATID. The table is a
// new inner map, filled before it is put in lb_maglev: a packet sees the
// old table or the new one, never a mix.
func (m *Maps) SetMaglevTable(revNATID uint32, table []uint32) error {
	if len(table) != MaglevTableSize {
		return fmt.Errorf("maglev table of %d entries, want %d", len(table), MaglevTableSize)
	}
	if m.maglevInner == nil {
		return fmt.Errorf("maglev: no table layout (maps opened without the object)")
	}
	inner, err := ebpf.NewMap(m.maglevInner)
	if err != nil {
		return fmt.Errorf("maglev table: %w", err)
	}
	defer inner.Close() // lb_maglev keeps its own reference
	keys := make([]uint32, len(table))
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := inner.BatchUpdate(keys, table, nil); err != nil {
		return fmt.Errorf("maglev table: %w", err)
	}
	if err := m.byName[MapMaglev].Put(revNATID, inner); err != nil {
		return m.classify(MapMaglev, err)
	}
	return nil
}

// DeleteMaglevTable removes a frontend's Maglev table, if it has one.
func (m *Maps) DeleteMaglevTable(revNATID uint32) error {
	return m.Delete(MapMaglev, revNATID)
}
