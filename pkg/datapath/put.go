package datapath

import (
	"fmt"
	"unsafe"
)

// Put writes key=value into the named map like Maps.Update, but hands the
// kernel pointers to K and V instead of marshalling them by reflection
// (which cost a tenth of a full sync). K and V must be the map's layouts
// (the generated types, or uint32 ids); sizes are checked.
func Put[K, V any](m *Maps, name string, key K, value V) error {
	mp := m.byName[name]
	if uintptr(mp.KeySize()) != unsafe.Sizeof(key) || uintptr(mp.ValueSize()) != unsafe.Sizeof(value) {
		return fmt.Errorf("map %s: key/value of %d/%d bytes, want %d/%d",
			name, unsafe.Sizeof(key), unsafe.Sizeof(value), mp.KeySize(), mp.ValueSize())
	}
	return m.Update(name, unsafe.Pointer(&key), unsafe.Pointer(&value))
}

// Remove deletes key from the named map like Maps.Delete, without
// reflection.
func Remove[K any](m *Maps, name string, key K) error {
	if mp := m.byName[name]; uintptr(mp.KeySize()) != unsafe.Sizeof(key) {
		return fmt.Errorf("map %s: key of %d bytes, want %d", name, unsafe.Sizeof(key), mp.KeySize())
	}
	return m.Delete(name, unsafe.Pointer(&key))
}
