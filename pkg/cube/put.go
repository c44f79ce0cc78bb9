package cube

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
)

// Put writes key=value into the named map like Maps.Update, but hands the
// map pointers to K and V instead of marshalling them by reflection
// (which cost a tenth of a full sync). K and V must be the map's layouts
// (the generated types, or uint32 ids); sizes are checked.
func Put[K, V any](m *Maps, name string, key K, value V) error {
	mp := m.Map(name)
	if uintptr(mp.KeySize()) != unsafe.Sizeof(key) || uintptr(mp.ValueSize()) != unsafe.Sizeof(value) {
		return fmt.Errorf("map %s: key/value of %d/%d bytes, want %d/%d",
			name, unsafe.Sizeof(key), unsafe.Sizeof(value), mp.KeySize(), mp.ValueSize())
	}
	return m.Update(name, unsafe.Pointer(&key), unsafe.Pointer(&value))
}

// Remove deletes key from the named map like Maps.Delete, without
// reflection.
func Remove[K any](m *Maps, name string, key K) error {
	if mp := m.Map(name); uintptr(mp.KeySize()) != unsafe.Sizeof(key) {
		return fmt.Errorf("map %s: key of %d bytes, want %d", name, unsafe.Sizeof(key), mp.KeySize())
	}
	return m.Delete(name, unsafe.Pointer(&key))
}

// Get reads key's value from the named map; ok is false when it has none.
func Get[K, V any](m *Maps, name string, key K) (v V, ok bool, err error) {
	mp := m.Map(name)
	if uintptr(mp.KeySize()) != unsafe.Sizeof(key) || uintptr(mp.ValueSize()) != unsafe.Sizeof(v) {
		return v, false, fmt.Errorf("map %s: key/value of %d/%d bytes, want %d/%d",
			name, unsafe.Sizeof(key), unsafe.Sizeof(v), mp.KeySize(), mp.ValueSize())
	}
	err = mp.Lookup(unsafe.Pointer(&key), unsafe.Pointer(&v))
	if isNotExist(err) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("read map %s: %w", name, err)
	}
	return v, true, nil
}

// batchReader is a map that reads its entries many per system call
// (the kernel's hash and array maps).
type batchReader interface {
	LookupBatches(keys, values any, fn func(n int) bool) error
}

// eachBatch is how many entries Each reads per batch.
const eachBatch = 4096

// Each calls fn for every entry of the named map, until fn returns false:
// read in batches where the map can, else entry by entry.
func Each[K, V any](m *Maps, name string, fn func(K, V) bool) error {
	if br, ok := m.Map(name).(batchReader); ok {
		ks, vs := make([]K, eachBatch), make([]V, eachBatch)
		err := br.LookupBatches(ks, vs, func(n int) bool {
			for i := range n {
				if !fn(ks[i], vs[i]) {
					return false
				}
			}
			return true
		})
		if !errors.Is(err, ebpf.ErrNotSupported) {
			if err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			return nil
		}
	}
	var k K
	var v V
	it := m.Map(name).Iterate()
	for it.Next(&k, &v) {
		if !fn(k, v) {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}

// batchChunk is the most keys one batch call carries: it bounds the
// kernel's time in one call.
const batchChunk = 4096

// PutBatch writes keys[i]=values[i] into the named map with one batch
// update per chunk: a full sync's hundreds of thousands of entries would
// otherwise cost a syscall each. The map writes in order and stops at the
// first failure; the error then says how many landed.
func PutBatch[K, V any](m *Maps, name string, keys []K, values []V) (written int, err error) {
	var k K
	var v V
	mp := m.Map(name)
	if uintptr(mp.KeySize()) != unsafe.Sizeof(k) || uintptr(mp.ValueSize()) != unsafe.Sizeof(v) {
		return 0, fmt.Errorf("map %s: key/value of %d/%d bytes, want %d/%d",
			name, unsafe.Sizeof(k), unsafe.Sizeof(v), mp.KeySize(), mp.ValueSize())
	}
	if len(keys) != len(values) {
		return 0, fmt.Errorf("map %s: %d keys, %d values", name, len(keys), len(values))
	}
	for lo := 0; lo < len(keys) && err == nil; lo += batchChunk {
		hi := min(lo+batchChunk, len(keys))
		var n int
		n, err = mp.BatchUpdate(keys[lo:hi], values[lo:hi])
		written += n
		err = m.classify(name, err)
		m.observeN(name, "update", n, nil)
		if err != nil {
			m.observe(name, "update", err)
		}
	}
	return written, err
}

// RemoveBatch deletes keys from the named map with one batch delete per
// chunk, like Remove: a key already missing is not an error. It stops at
// the first other failure; the error then says how many were removed.
func RemoveBatch[K any](m *Maps, name string, keys []K) (removed int, err error) {
	var k K
	mp := m.Map(name)
	if uintptr(mp.KeySize()) != unsafe.Sizeof(k) {
		return 0, fmt.Errorf("map %s: key of %d bytes, want %d", name, unsafe.Sizeof(k), mp.KeySize())
	}
	for lo := 0; lo < len(keys); {
		hi := min(lo+batchChunk, len(keys))
		n, err := mp.BatchDelete(keys[lo:hi])
		removed += n
		m.observeN(name, "delete", n, nil)
		lo += n
		if isNotExist(err) {
			// The kernel stops at a missing key: it is gone already, as
			// Delete takes it; go on past it.
			m.observe(name, "delete", nil)
			lo++
			continue
		}
		if err != nil {
			m.observe(name, "delete", err)
			return removed, fmt.Errorf("delete from map %s (%d of %d removed): %w", name, removed, len(keys), err)
		}
	}
	return removed, nil
}
