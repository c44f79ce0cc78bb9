package lb

import (
	"fmt"
	"slices"
	"testing"
)

// TestMaglevTable: every backend gets its share of the table (within one
// entry), the table depends only on the backends' names, and removing one
// backend moves little more than its own entries.
func TestMaglevTable(t *testing.T) {
	const m = 16381
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("10.244.%d.%d:8080", i/4, i))
	}
	table := maglevTable(names, m)
	count := make([]int, len(names))
	for _, b := range table {
		count[b]++
	}
	if lo, hi := slices.Min(count), slices.Max(count); hi-lo > 1 {
		t.Errorf("entries per backend from %d to %d; want within one", lo, hi)
	}
	if !slices.Equal(maglevTable(slices.Clone(names), m), table) {
		t.Error("the same backends gave another table")
	}

	fewer := maglevTable(names[1:], m) // backend 0 removed
	moved := 0
	for i := range table {
		if table[i] != 0 && names[table[i]] != names[1:][fewer[i]] {
			moved++
		}
	}
	// Entries of remaining backends that moved: ideally none; Maglev
	// trades a little disruption for balance.
	if frac := float64(moved) / m; frac > 0.02 {
		t.Errorf("%.3f of the entries of remaining backends moved when one of 10 left", frac)
	}
}
