package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/netcube/netcube/pkg/cube"
)

// kernelMap is a loaded BPF map as a cube writes it (cube.Map).
type kernelMap struct {
	*ebpf.Map
	name  string
	inner *ebpf.MapSpec // a map of maps' inner layout; nil otherwise
}

var _ cube.Map = (*kernelMap)(nil)

func (m *kernelMap) Name() string { return m.name }

func (m *kernelMap) Update(key, value any) error { return m.Map.Update(key, value, ebpf.UpdateAny) }

func (m *kernelMap) BatchUpdate(keys, values any) (int, error) {
	return m.Map.BatchUpdate(keys, values, nil)
}

func (m *kernelMap) BatchDelete(keys any) (int, error) {
	return m.Map.BatchDelete(keys, nil)
}

func (m *kernelMap) Iterate() cube.Iterator { return m.Map.Iterate() }

// LookupBatches reads a hash or array map len(keys) entries per system
// call (keys and values: slices of the layouts), calling fn with each
// chunk's count until fn returns false or the map is read. Iterate costs
// two calls per entry: restoring 1.1 million pinned entries that way took
// a restarted agent 6.5 s. Other map types: ebpf.ErrNotSupported.
func (m *kernelMap) LookupBatches(keys, values any, fn func(n int) bool) error {
	switch m.Type() {
	case ebpf.Hash, ebpf.Array, ebpf.LRUHash:
	default:
		return fmt.Errorf("map %s: batch lookup of a %s: %w", m.name, m.Type(), ebpf.ErrNotSupported)
	}
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.Map.BatchLookup(&cursor, keys, values, nil)
		if n > 0 && !fn(n) {
			return nil
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil // read to the end
		}
		if err != nil {
			return err
		}
	}
}

func (m *kernelMap) InnerMaxEntries() uint32 {
	if m.inner == nil {
		return 0
	}
	return m.inner.MaxEntries
}

// ReplaceInner fills a new inner map and then puts it under key: readers
// see the old table or the new one, never a mix.
func (m *kernelMap) ReplaceInner(key, values any) error {
	if m.inner == nil {
		return fmt.Errorf("map %s has no inner maps (or was opened without the object)", m.name)
	}
	inner, err := ebpf.NewMap(m.inner)
	if err != nil {
		return fmt.Errorf("inner map of %s: %w", m.name, err)
	}
	defer inner.Close() // the outer map keeps its own reference
	vals, ok := values.([]uint32)
	if !ok {
		return fmt.Errorf("inner map of %s: values of type %T, want []uint32", m.name, values)
	}
	if len(vals) != int(m.inner.MaxEntries) {
		return fmt.Errorf("inner map of %s: %d values, want %d", m.name, len(vals), m.inner.MaxEntries)
	}
	keys := make([]uint32, len(vals))
	for i := range keys {
		keys[i] = uint32(i)
	}
	if _, err := inner.BatchUpdate(keys, vals, nil); err != nil {
		return fmt.Errorf("inner map of %s: %w", m.name, err)
	}
	return m.Map.Put(key, inner)
}

// Unwrap is the kernel map itself, for what only it can do (an iterator
// over its entries).
func (m *kernelMap) Unwrap() *ebpf.Map { return m.Map }
