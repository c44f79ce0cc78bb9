package lb

import (
	"cmp"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestByName: entries by namespace and name, counted once however often
// they are put, each namespace's map gone with its last entry.
func TestByName(t *testing.T) {
	m := newByName[int]()
	m.put("a", "x", 1)
	m.put("b", "x", 2)
	m.put("a", "y", 3)
	m.put("a", "x", 4) // replaced, not added
	if v, ok := m.get("a", "x"); !ok || v != 4 {
		t.Errorf("a/x = %d, %v; want 4", v, ok)
	}
	if v, ok := m.get("b", "x"); !ok || v != 2 {
		t.Errorf("b/x = %d, %v; want 2 (same name, another namespace)", v, ok)
	}
	if m.len() != 3 {
		t.Errorf("len %d, want 3", m.len())
	}
	keys := m.keys()
	slices.SortFunc(keys, compareNames)
	want := []types.NamespacedName{{Namespace: "a", Name: "x"}, {Namespace: "a", Name: "y"}, {Namespace: "b", Name: "x"}}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	m.remove("b", "x")
	m.remove("b", "x") // absent: nothing
	m.remove("c", "z")
	if _, ok := m.get("b", "x"); ok || m.len() != 2 || len(m.namespaces) != 1 {
		t.Errorf("after removing b/x: len %d, namespaces %d; want 2 and 1", m.len(), len(m.namespaces))
	}
}

func compareNames(p, q types.NamespacedName) int {
	return cmp.Or(cmp.Compare(p.Namespace, q.Namespace), cmp.Compare(p.Name, q.Name))
}
