package cube

// Map is one BPF map as a cube writes it: the kernel's (package datapath)
// or memory's (package cubetest). Keys and values are pointers to the
// map's layouts (the generated types), unsafe.Pointers to them, or plain
// integer ids, as cilium/ebpf takes them.
type Map interface {
	Name() string
	KeySize() uint32
	ValueSize() uint32
	MaxEntries() uint32
	// Update writes key=value (create or replace).
	Update(key, value any) error
	// Delete removes key; a missing key is ebpf.ErrKeyNotExist.
	Delete(key any) error
	// Lookup reads key's value into valueOut; a missing key is
	// ebpf.ErrKeyNotExist.
	Lookup(key, valueOut any) error
	// BatchUpdate writes keys[i]=values[i] (slices of the layouts) in
	// order, stopping at the first failure; it returns how many landed.
	BatchUpdate(keys, values any) (int, error)
	// BatchDelete removes keys (a slice of the layout) in order, stopping
	// at the first failure (a missing key: ebpf.ErrKeyNotExist); it
	// returns how many were removed.
	BatchDelete(keys any) (int, error)
	// Iterate walks the entries.
	Iterate() Iterator
	// ReplaceInner, on a map of maps, puts under key a new inner map
	// holding values (a slice, value i under key i), filled before it is
	// visible: a reader sees the old inner map or the new one, whole.
	ReplaceInner(key, values any) error
	// InnerMaxEntries is the size of a map of maps' inner maps.
	InnerMaxEntries() uint32
}

// Iterator walks a map's entries (cilium/ebpf's MapIterator).
type Iterator interface {
	Next(keyOut, valueOut any) bool
	Err() error
}
