package datapath

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
)

// later is what loading the onDemand programs takes once the object is
// loaded: their specs, and the object's maps (clones, the constants'
// sections included), so that they share every map with the programs
// loaded at start.
type later struct {
	mu   sync.Mutex
	spec *ebpf.CollectionSpec // nil once loaded
	opts ebpf.CollectionOptions
	maps map[string]*ebpf.Map
}

func newLater(spec *ebpf.CollectionSpec, opts *ebpf.CollectionOptions, objMaps map[string]*ebpf.Map) (*later, error) {
	lt := &later{spec: spec.Copy(), opts: ebpf.CollectionOptions{Programs: opts.Programs}, maps: map[string]*ebpf.Map{}}
	maps.DeleteFunc(lt.spec.Programs, func(name string, _ *ebpf.ProgramSpec) bool { return !slices.Contains(onDemand, name) })
	for name, m := range objMaps {
		c, err := m.Clone()
		if err != nil {
			lt.Close()
			return nil, fmt.Errorf("map %s: %w", name, err)
		}
		lt.maps[name] = c
	}
	return lt, nil
}

// load loads the onDemand programs into objs, once.
func (lt *later) load(objs *bpfObjects) error {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.spec == nil {
		return nil
	}
	opts := lt.opts
	opts.MapReplacements = lt.maps
	c, err := ebpf.NewCollectionWithOptions(lt.spec, opts)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("load the netkit pod programs: %+v", ve)
		}
		return fmt.Errorf("load the netkit pod programs: %w", err)
	}
	defer c.Close() // the map clones it holds
	objs.FromPodNetkit, objs.ToPodNetkit = c.Programs["from_pod_netkit"], c.Programs["to_pod_netkit"]
	clear(c.Programs) // now objs'
	lt.closeMaps()
	lt.spec = nil
	return nil
}

// Close releases what loading later would have taken.
func (lt *later) Close() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.closeMaps()
}

func (lt *later) closeMaps() {
	for _, m := range lt.maps {
		m.Close()
	}
	clear(lt.maps)
}

// LoadNetkitPrograms loads a netkit pod's programs (from_pod_netkit,
// to_pod_netkit) if they are not yet: the first netkit pod does (AttachPod),
// and an agent giving pods netkit pairs at its start, so that no CNI ADD
// waits for the verifier. Agents whose pods are veths never load them.
func (d *Datapath) LoadNetkitPrograms() error {
	return d.later.load(&d.objs)
}
