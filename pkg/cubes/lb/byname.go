package lb

import (
	"iter"

	"k8s.io/apimachinery/pkg/types"
)

// byName is a map keyed by namespace and name, kept as one map of names
// per namespace: a key then holds one string where a NamespacedName holds
// two, 16 bytes less an entry (with the map's slack, about 5 MB at 200,000
// EndpointSlices). A cluster has few namespaces and many objects in each.
type byName[V any] struct {
	namespaces map[string]map[string]V
	n          int
}

func newByName[V any]() byName[V] {
	return byName[V]{namespaces: map[string]map[string]V{}}
}

func (m *byName[V]) get(namespace, name string) (V, bool) {
	v, ok := m.namespaces[namespace][name]
	return v, ok
}

func (m *byName[V]) put(namespace, name string, v V) {
	names := m.namespaces[namespace]
	if names == nil {
		names = map[string]V{}
		m.namespaces[namespace] = names
	}
	if _, ok := names[name]; !ok {
		m.n++
	}
	names[name] = v
}

func (m *byName[V]) remove(namespace, name string) {
	names := m.namespaces[namespace]
	if _, ok := names[name]; !ok {
		return
	}
	delete(names, name)
	m.n--
	if len(names) == 0 {
		delete(m.namespaces, namespace)
	}
}

func (m *byName[V]) len() int { return m.n }

// all yields every entry, in no order.
func (m *byName[V]) all() iter.Seq2[types.NamespacedName, V] {
	return func(yield func(types.NamespacedName, V) bool) {
		for ns, names := range m.namespaces {
			for name, v := range names {
				if !yield(types.NamespacedName{Namespace: ns, Name: name}, v) {
					return
				}
			}
		}
	}
}

// keys lists every entry's key, in no order.
func (m *byName[V]) keys() []types.NamespacedName {
	out := make([]types.NamespacedName, 0, m.n)
	for k := range m.all() {
		out = append(out, k)
	}
	return out
}
