package datapath

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
)

// later is what loading the onDemand programs takes once the object is
// loaded: the object's maps (clones, the constants' sections included), so
// that they share every map with the programs loaded at start. The
// programs' specs are read from the object again when they are loaded:
// kept, their instructions would be most of a megabyte held for the
// agent's life, for nodes that may never have a netkit pod.
type later struct {
	mu     sync.Mutex
	loaded bool
	opts   ebpf.CollectionOptions
	maps   map[string]*ebpf.Map
}

func newLater(opts *ebpf.CollectionOptions, objMaps map[string]*ebpf.Map) (*later, error) {
	lt := &later{opts: ebpf.CollectionOptions{Programs: opts.Programs}, maps: map[string]*ebpf.Map{}}
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
	if lt.loaded {
		return nil
	}
	spec, err := lt.spec()
	if err != nil {
		return fmt.Errorf("load the netkit pod programs: %w", err)
	}
	opts := lt.opts
	opts.MapReplacements = map[string]*ebpf.Map{}
	for name := range spec.Maps {
		opts.MapReplacements[name] = lt.maps[name]
	}
	c, err := ebpf.NewCollectionWithOptions(spec, opts)
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
	lt.loaded = true
	return nil
}

// spec is the object's onDemand programs with the maps they use alone,
// each sized as the map created at start (the agent's size flags).
func (lt *later) spec() (*ebpf.CollectionSpec, error) {
	all, err := loadBpf()
	if err != nil {
		return nil, err
	}
	spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{}, Maps: map[string]*ebpf.MapSpec{}, Types: all.Types}
	for _, name := range onDemand {
		ps := all.Programs[name]
		if ps == nil {
			return nil, fmt.Errorf("the BPF object has no program %s", name)
		}
		spec.Programs[name] = ps
		for _, ins := range ps.Instructions {
			ms := all.Maps[ins.Reference()]
			if ms == nil {
				continue
			}
			m := lt.maps[ms.Name]
			if m == nil {
				return nil, fmt.Errorf("program %s uses map %s, which the object loaded at start has not", name, ms.Name)
			}
			ms.MaxEntries, ms.Pinning = m.MaxEntries(), ebpf.PinNone
			spec.Maps[ins.Reference()] = ms
		}
	}
	return spec, nil
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
