package cube

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Maps is a set of maps by name: one cube's (what Start is given), or
// every map of the object (inspection).
type Maps struct {
	byName map[string]Map
	flags  map[string]string // size flag by map name, for MapFullError
	// Observe, if set, is told about every update and delete (metrics):
	// n of them, all with err (a batch of hundreds of thousands is told
	// once, not once per entry).
	Observe func(mapName, op string, n int, err error)
}

// NewMaps makes a set of maps; sizeFlags names, by map, the flag that
// sizes it (errors about a full map point at it).
func NewMaps(maps []Map, sizeFlags map[string]string) *Maps {
	m := &Maps{byName: map[string]Map{}, flags: sizeFlags}
	for _, mp := range maps {
		m.byName[mp.Name()] = mp
	}
	return m
}

// Map returns the named map, or panics: a cube asking for a map it did
// not declare is a programming error the cube's tests catch.
func (m *Maps) Map(name string) Map {
	mp, ok := m.byName[name]
	if !ok {
		panic(fmt.Sprintf("map %s is not in this set (declared by another cube, or not at all)", name))
	}
	return mp
}

// Has says whether the set holds the named map.
func (m *Maps) Has(name string) bool { _, ok := m.byName[name]; return ok }

// Names lists the maps of the set.
func (m *Maps) Names() []string {
	out := make([]string, 0, len(m.byName))
	for n := range m.byName {
		out = append(out, n)
	}
	return out
}

// Size returns the number of entries of a map.
func (m *Maps) Size(name string) uint32 { return m.Map(name).MaxEntries() }

// Update writes key=value into the named map, turning "map full" into a
// MapFullError that names the size flag.
func (m *Maps) Update(name string, key, value any) error {
	err := m.classify(name, m.Map(name).Update(key, value))
	m.observe(name, "update", err)
	return err
}

// Delete removes key from the named map; a missing key is not an error.
func (m *Maps) Delete(name string, key any) error {
	err := m.Map(name).Delete(key)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		err = nil
	}
	m.observe(name, "delete", err)
	if err != nil {
		return fmt.Errorf("delete from map %s: %w", name, err)
	}
	return nil
}

// ReplaceInner puts a new inner map of values under key (see Map).
func (m *Maps) ReplaceInner(name string, key, values any) error {
	err := m.classify(name, m.Map(name).ReplaceInner(key, values))
	m.observe(name, "update", err)
	return err
}

func (m *Maps) observe(name, op string, err error) { m.observeN(name, op, 1, err) }

// observeN tells Observe about n operations with err (none: nothing).
func (m *Maps) observeN(name, op string, n int, err error) {
	if m.Observe != nil && n > 0 {
		m.Observe(name, op, n, err)
	}
}

// classify turns a failed update's "map full" into a MapFullError that names
// the size flag, and says which map any other failure came from.
func (m *Maps) classify(name string, err error) error {
	switch {
	case errors.Is(err, unix.E2BIG) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.ENOSPC):
		return &MapFullError{Map: name, Size: m.Map(name).MaxEntries(), Flag: m.flags[name], Err: err}
	case err != nil:
		return fmt.Errorf("update map %s: %w", name, err)
	}
	return nil
}

// MapFullError says that a map has no room left, and which flag sizes it.
type MapFullError struct {
	Map  string
	Size uint32
	Flag string
	Err  error
}

func (e *MapFullError) Error() string {
	if e.Flag == "" {
		return fmt.Sprintf("map %s is full (%d entries)", e.Map, e.Size)
	}
	return fmt.Sprintf("map %s is full (%d entries): raise --%s", e.Map, e.Size, e.Flag)
}

func (e *MapFullError) Unwrap() error { return e.Err }

func isNotExist(err error) bool { return errors.Is(err, ebpf.ErrKeyNotExist) }
