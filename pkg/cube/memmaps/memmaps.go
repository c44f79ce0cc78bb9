// Package memmaps is the cube map layer in memory: each cube's declared
// maps, with the BPF object's key and value sizes, map types and sizes,
// behaving as the kernel's do for what a cube does from Go (create or
// replace, delete, lookup, batch update in order, iterate, a full map
// refusing new keys), and with faults to inject. Hollow agents
// (--datapath=memory: the real agent without BPF, hundreds to a machine)
// run on it, and cube tests (package cubetest) without root or a kernel.
// Nothing here runs a packet: an LPM trie is looked up by its exact key.
package memmaps

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/datapath"
)

// Op is one map operation, as a fault sees it.
type Op struct {
	Map  string
	Kind string // "update", "delete", "inner" (ReplaceInner)
	Key  []byte
}

// Set is the memory maps of one or more cubes.
type Set struct {
	// Maps is the set a cube is given.
	Maps  *cube.Maps
	mu    sync.Mutex
	maps  map[string]*memMap
	fault func(Op) error
}

// New returns memory maps for the maps the cubes declare, sized as they
// declare or as sizes says (by map name).
func New(sizes map[string]uint32, cubes ...cube.Cube) (*Set, error) {
	spec, err := datapath.Spec()
	if err != nil {
		return nil, err
	}
	for name := range sizes {
		if _, ok := spec.Maps[name]; !ok {
			return nil, fmt.Errorf("map size for %s: the BPF object has no such map", name)
		}
	}
	f := &Set{maps: map[string]*memMap{}}
	var all []cube.Map
	flags := map[string]string{}
	for _, c := range cubes {
		for _, ms := range c.Maps() {
			s, ok := spec.Maps[ms.Name]
			if !ok {
				return nil, fmt.Errorf("cube %s declares map %s, which the BPF object does not define", c.Name(), ms.Name)
			}
			size := s.MaxEntries
			if ms.DefaultSize != 0 {
				size = ms.DefaultSize
			}
			if n := sizes[ms.Name]; n != 0 {
				size = n
			}
			m := &memMap{fake: f, name: ms.Name, typ: s.Type, keySize: s.KeySize, valueSize: s.ValueSize,
				maxEntries: size, entries: map[string][]byte{}}
			if s.InnerMap != nil {
				m.innerSize = s.InnerMap.MaxEntries
				m.inner = map[string][]uint32{}
			}
			f.maps[ms.Name] = m
			flags[ms.Name] = ms.SizeFlag
			all = append(all, m)
		}
	}
	f.Maps = cube.NewMaps(all, flags)
	return f, nil
}

// Of is the set's maps that cube c declares (a cube is given its own
// maps only, as the kernel datapath gives them).
func (f *Set) Of(c cube.Cube) *cube.Maps {
	var own []cube.Map
	flags := map[string]string{}
	for _, ms := range c.Maps() {
		if m, ok := f.maps[ms.Name]; ok {
			own = append(own, m)
			flags[ms.Name] = ms.SizeFlag
		}
	}
	return cube.NewMaps(own, flags)
}

// FailWhen makes every operation for which fail returns an error fail with
// it, changing nothing; nil stops injecting.
func (f *Set) FailWhen(fail func(Op) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fail
}

// Len is the number of entries of the named map.
func (f *Set) Len(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.maps[name].entries)
}

// Inner returns the inner map under key of a map of maps (nil: none).
func (f *Set) Inner(name string, key any) []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.maps[name]
	kb, err := bytesOf(key, m.keySize)
	if err != nil {
		panic(err)
	}
	return slices.Clone(m.inner[string(kb)])
}

type memMap struct {
	fake               *Set
	name               string
	typ                ebpf.MapType
	keySize, valueSize uint32
	maxEntries         uint32
	entries            map[string][]byte
	innerSize          uint32
	inner              map[string][]uint32
}

var _ cube.Map = (*memMap)(nil)

func (m *memMap) Name() string            { return m.name }
func (m *memMap) KeySize() uint32         { return m.keySize }
func (m *memMap) ValueSize() uint32       { return m.valueSize }
func (m *memMap) MaxEntries() uint32      { return m.maxEntries }
func (m *memMap) InnerMaxEntries() uint32 { return m.innerSize }

// injected returns the fault for op, with m.fake.mu held.
func (m *memMap) injected(kind string, key []byte) error {
	if m.fake.fault == nil {
		return nil
	}
	return m.fake.fault(Op{Map: m.name, Kind: kind, Key: slices.Clone(key)})
}

func (m *memMap) Update(key, value any) error {
	m.fake.mu.Lock()
	defer m.fake.mu.Unlock()
	return m.update(key, value)
}

func (m *memMap) update(key, value any) error {
	kb, err := bytesOf(key, m.keySize)
	if err != nil {
		return err
	}
	vb, err := m.valueBytes(value)
	if err != nil {
		return err
	}
	if err := m.injected("update", kb); err != nil {
		return err
	}
	if err := m.makeRoom(kb); err != nil {
		return err
	}
	m.entries[string(kb)] = slices.Clone(vb)
	return nil
}

// makeRoom refuses a new key when the map is full, as the kernel does
// (an LRU map evicts instead; an array has all its keys).
func (m *memMap) makeRoom(kb []byte) error {
	if m.typ == ebpf.Array {
		if idx := uint32(kb[0]) | uint32(kb[1])<<8 | uint32(kb[2])<<16 | uint32(kb[3])<<24; idx >= m.maxEntries {
			return fmt.Errorf("update %s: index %d: %w", m.name, idx, unix.E2BIG)
		}
		return nil
	}
	if _, ok := m.entries[string(kb)]; ok || uint32(len(m.entries)) < m.maxEntries {
		return nil
	}
	if m.typ == ebpf.LRUHash {
		for k := range m.entries {
			delete(m.entries, k)
			return nil
		}
	}
	return fmt.Errorf("update %s: %w", m.name, unix.E2BIG)
}

func (m *memMap) Delete(key any) error {
	m.fake.mu.Lock()
	defer m.fake.mu.Unlock()
	return m.delete(key)
}

// delete is Delete with the fake's lock held.
func (m *memMap) delete(key any) error {
	kb, err := bytesOf(key, m.keySize)
	if err != nil {
		return err
	}
	if err := m.injected("delete", kb); err != nil {
		return err
	}
	if _, ok := m.entries[string(kb)]; !ok {
		return fmt.Errorf("delete %s: %w", m.name, ebpf.ErrKeyNotExist)
	}
	delete(m.entries, string(kb))
	delete(m.inner, string(kb))
	return nil
}

func (m *memMap) Lookup(key, valueOut any) error {
	m.fake.mu.Lock()
	defer m.fake.mu.Unlock()
	kb, err := bytesOf(key, m.keySize)
	if err != nil {
		return err
	}
	v, ok := m.entries[string(kb)]
	if !ok && m.typ == ebpf.Array && m.makeRoom(kb) == nil {
		// An array has every index below its size, zero until written.
		v, ok = make([]byte, m.valueSize), true
	}
	if !ok {
		return fmt.Errorf("lookup %s: %w", m.name, ebpf.ErrKeyNotExist)
	}
	if m.perCPU() {
		return perCPUOut(valueOut, v, m.valueSize)
	}
	return copyOut(valueOut, v)
}

// perCPU says whether the map holds a value per CPU: as the kernel's,
// it is written and read as a slice of them (any number of CPUs here).
func (m *memMap) perCPU() bool {
	return m.typ == ebpf.PerCPUArray || m.typ == ebpf.PerCPUHash || m.typ == ebpf.LRUCPUHash
}

// valueBytes is value as the map stores it: a per-CPU map's slice of
// values one after the other.
func (m *memMap) valueBytes(value any) ([]byte, error) {
	if !m.perCPU() {
		return bytesOf(value, m.valueSize)
	}
	v := reflect.ValueOf(value)
	if v.Kind() != reflect.Slice || v.Len() == 0 {
		return nil, fmt.Errorf("update %s: a per-CPU map's value is a slice of one per CPU, not %T", m.name, value)
	}
	var out []byte
	for i := range v.Len() {
		b, err := bytesOf(v.Index(i).Interface(), m.valueSize)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// perCPUOut writes per-CPU values b into out, a pointer to a slice.
func perCPUOut(out any, b []byte, size uint32) error {
	p := reflect.ValueOf(out)
	if p.Kind() != reflect.Pointer || p.Elem().Kind() != reflect.Slice {
		return fmt.Errorf("per-CPU values go into a pointer to a slice, not %T", out)
	}
	n := len(b) / int(size)
	sl := reflect.MakeSlice(p.Elem().Type(), n, n)
	for i := range n {
		dst, err := bytesOf(sl.Index(i).Addr().Interface(), size)
		if err != nil {
			return err
		}
		copy(dst, b[i*int(size):(i+1)*int(size)])
	}
	p.Elem().Set(sl)
	return nil
}

func (m *memMap) BatchUpdate(keys, values any) (int, error) {
	m.fake.mu.Lock()
	defer m.fake.mu.Unlock()
	ks, vs := reflect.ValueOf(keys), reflect.ValueOf(values)
	if ks.Kind() != reflect.Slice || vs.Kind() != reflect.Slice || ks.Len() != vs.Len() {
		return 0, fmt.Errorf("batch update %s: keys and values must be slices of one length", m.name)
	}
	for i := range ks.Len() {
		if err := m.update(ks.Index(i).Addr().Interface(), vs.Index(i).Addr().Interface()); err != nil {
			return i, err
		}
	}
	return ks.Len(), nil
}

func (m *memMap) BatchDelete(keys any) (int, error) {
	m.fake.mu.Lock()
	defer m.fake.mu.Unlock()
	ks := reflect.ValueOf(keys)
	if ks.Kind() != reflect.Slice {
		return 0, fmt.Errorf("batch delete %s: keys must be a slice", m.name)
	}
	for i := range ks.Len() {
		if err := m.delete(ks.Index(i).Addr().Interface()); err != nil {
			return i, err
		}
	}
	return ks.Len(), nil
}

func (m *memMap) ReplaceInner(key, values any) error {
	m.fake.mu.Lock()
	defer m.fake.mu.Unlock()
	if m.inner == nil {
		return fmt.Errorf("map %s has no inner maps", m.name)
	}
	vals, ok := values.([]uint32)
	if !ok || uint32(len(vals)) != m.innerSize {
		return fmt.Errorf("inner map of %s: want %d uint32 values, got %T", m.name, m.innerSize, values)
	}
	kb, err := bytesOf(key, m.keySize)
	if err != nil {
		return err
	}
	if err := m.injected("inner", kb); err != nil {
		return err
	}
	if err := m.makeRoom(kb); err != nil {
		return err
	}
	m.entries[string(kb)] = make([]byte, m.valueSize)
	m.inner[string(kb)] = slices.Clone(vals)
	return nil
}

func (m *memMap) Iterate() cube.Iterator {
	m.fake.mu.Lock()
	defer m.fake.mu.Unlock()
	keys := make([]string, 0, len(m.entries))
	for k := range m.entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	it := &iterator{}
	for _, k := range keys {
		it.keys = append(it.keys, []byte(k))
		it.values = append(it.values, slices.Clone(m.entries[k]))
	}
	return it
}

// iterator walks a snapshot of a map, in key order.
type iterator struct {
	keys, values [][]byte
	next         int
	err          error
}

func (it *iterator) Next(keyOut, valueOut any) bool {
	if it.err != nil || it.next >= len(it.keys) {
		return false
	}
	i := it.next
	it.next++
	if it.err = copyOut(keyOut, it.keys[i]); it.err != nil {
		return false
	}
	if it.err = copyOut(valueOut, it.values[i]); it.err != nil {
		return false
	}
	return true
}

func (it *iterator) Err() error { return it.err }

// bytesOf is x's memory: x points at a key or value of size bytes (or is
// one, as cilium/ebpf also takes integer ids by value).
func bytesOf(x any, size uint32) ([]byte, error) {
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.UnsafePointer:
		return unsafe.Slice((*byte)(v.UnsafePointer()), size), nil
	case reflect.Pointer:
		if v.Type().Elem().Size() != uintptr(size) {
			return nil, fmt.Errorf("%T is not %d bytes", x, size)
		}
		return unsafe.Slice((*byte)(v.UnsafePointer()), size), nil
	}
	if v.Type().Size() != uintptr(size) {
		return nil, fmt.Errorf("%T is not %d bytes", x, size)
	}
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	return unsafe.Slice((*byte)(p.UnsafePointer()), size), nil
}

// copyOut writes b where out points (a *[]byte gets a copy of b).
func copyOut(out any, b []byte) error {
	if bs, ok := out.(*[]byte); ok {
		*bs = slices.Clone(b)
		return nil
	}
	dst, err := bytesOf(out, uint32(len(b)))
	if err != nil {
		return err
	}
	if k := reflect.ValueOf(out).Kind(); k != reflect.Pointer && k != reflect.UnsafePointer {
		return fmt.Errorf("cannot write into %T", out)
	}
	copy(dst, b)
	return nil
}
