package datapath

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// Clone loads a private copy of the datapath pinned under pinDir: the same
// programs, over new maps holding what the pinned maps hold now (per-CPU
// counters, the event ring buffer and socket storage start empty). What
// runs on the copy (BPF_PROG_RUN: netcube trace) reads the node's real
// state and changes none of it.
func Clone(pinDir string, cfg Config) (*Datapath, error) {
	pinned, closePinned, err := OpenPinned(pinDir)
	if err != nil {
		return nil, err
	}
	defer closePinned()
	sizes := map[string]uint32{}
	for _, name := range pinned.Names() {
		sizes[name] = pinned.Map(name).MaxEntries()
	}
	cfg.PinDir, cfg.MapSizes = "", sizes
	d, err := Load(cfg)
	if err != nil {
		return nil, err
	}
	for _, name := range pinned.Names() {
		dst, ok := d.maps[name]
		if !ok {
			continue
		}
		if err := copyMap(pinned.Map(name).(*kernelMap), dst); err != nil {
			d.Close()
			return nil, fmt.Errorf("copy map %s: %w", name, err)
		}
	}
	return d, nil
}

func copyMap(src, dst *kernelMap) error {
	switch src.Type() {
	case ebpf.PerCPUArray, ebpf.PerCPUHash, ebpf.LRUCPUHash, ebpf.RingBuf, ebpf.SkStorage:
		return nil // counters, events, per-socket state: not the copy's to hold
	case ebpf.ArrayOfMaps, ebpf.HashOfMaps:
		return copyMapOfMaps(src, dst)
	}
	key := make([]byte, src.KeySize())
	var next []byte
	var prev any
	for {
		next = make([]byte, src.KeySize())
		if err := src.NextKey(prev, next); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil
			}
			return err
		}
		copy(key, next)
		prev = next
		val := make([]byte, src.ValueSize())
		if err := src.Lookup(key, val); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue // gone meanwhile
			}
			return err
		}
		if err := dst.Map.Put(key, val); err != nil {
			return err
		}
	}
}

// copyMapOfMaps copies each inner map (an array of uint32, lb_maglev's
// Maglev tables) into a new inner map of the copy.
func copyMapOfMaps(src, dst *kernelMap) error {
	var key uint32
	var id uint32
	it := src.Map.Iterate()
	for it.Next(&key, &id) {
		inner, err := ebpf.NewMapFromID(ebpf.MapID(id))
		if err != nil {
			return err
		}
		vals := make([]uint32, inner.MaxEntries())
		for i := range vals {
			if err := inner.Lookup(uint32(i), &vals[i]); err != nil {
				inner.Close()
				return err
			}
		}
		inner.Close()
		if err := dst.ReplaceInner(key, vals); err != nil {
			return err
		}
	}
	return it.Err()
}
