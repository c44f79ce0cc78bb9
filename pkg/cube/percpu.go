package cube

// PerCPUSum reads a per-CPU counter (a __u64 per CPU) of m under key and
// sums it across CPUs; 0 if it cannot be read.
func PerCPUSum(m Map, key uint32) uint64 {
	var perCPU []uint64
	if err := m.Lookup(key, &perCPU); err != nil {
		return 0
	}
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n
}
