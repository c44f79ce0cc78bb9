package model

import "sync"

// Port lists are shared: most Services have one port, most of them one of
// a few (80/TCP "http", 443/TCP "https", ...), and so do their
// EndpointSlices. A Service or slice with a single port shares one list
// with every other that has the same, rather than 100,000 Services keeping
// 200,000 copies of a handful of lists (and of their names). Shared lists
// are read only: their elements must never be changed.
var sharedPorts struct {
	mu       sync.Mutex
	service  map[ServicePort]*[]ServicePort
	endpoint map[EndpointPort]*[]EndpointPort
}

// maxSharedPorts bounds each table: beyond that many distinct lists, an
// object keeps its own.
const maxSharedPorts = 4096

// sharedServicePorts returns a reference to ps, or to an equal list shared
// with other Services: a single port without a NodePort (a NodePort is
// the Service's own). nil: no ports.
func sharedServicePorts(ps []ServicePort) *[]ServicePort {
	return share(&sharedPorts.service, ps, len(ps) == 1 && ps[0].NodePort == 0)
}

// sharedEndpointPorts returns a reference to ps, or to an equal list
// shared with other EndpointSlices: a single port. nil: no ports.
func sharedEndpointPorts(ps []EndpointPort) *[]EndpointPort {
	return share(&sharedPorts.endpoint, ps, len(ps) == 1)
}

// share returns nil for no ports; for a list that may be shared (one
// port), a reference to the list held for its port, holding ps (its
// length its capacity: an append copies) if there is none and the table
// has room; else a reference to ps of its own.
func share[T comparable](table *map[T]*[]T, ps []T, shareable bool) *[]T {
	switch {
	case len(ps) == 0:
		return nil
	case !shareable:
		return ref(ps)
	}
	sharedPorts.mu.Lock()
	defer sharedPorts.mu.Unlock()
	if l, ok := (*table)[ps[0]]; ok {
		return l
	}
	if *table == nil {
		*table = map[T]*[]T{}
	}
	if len(*table) >= maxSharedPorts {
		return ref(ps)
	}
	l := ref(ps[:1:1])
	(*table)[ps[0]] = l
	return l
}

// ref is a reference to ps of its own (not &ps: that would move every
// caller's ps to the heap).
func ref[T any](ps []T) *[]T {
	l := new([]T)
	*l = ps
	return l
}
