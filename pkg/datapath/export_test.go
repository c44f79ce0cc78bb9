package datapath

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cilium/ebpf"
)

// AttachPodTCX attaches a pod as agents did before the tc filters: tcx
// links, pinned (an upgrade's starting point).
func (d *Datapath) AttachPodTCX(ifname string, ifindex int) error {
	return d.attachTCX(podLinkPrefix+ifname, ifname, ifindex, d.objs.FromPod, d.objs.ToPod)
}

// LoadedObject is the BPF object loaded without pins, for the tests
// comparing the parallel load with cilium/ebpf's own.
type LoadedObject struct {
	// Maps is the map IDs by name, and ProgramMaps the IDs of the maps each
	// program uses (the kernel's view), by program.
	Maps        map[string]ebpf.MapID
	ProgramMaps map[string][]ebpf.MapID
	// Verified is the instructions the verifier walked, by program (its
	// work, which its time follows).
	Verified map[string]uint32
	Close    func()
}

// LoadObject loads the object with its programs in parallel (loadObjects)
// or one after the other (LoadAndAssign).
func LoadObject(parallel bool) (*LoadedObject, error) {
	spec, err := loadBpf()
	if err != nil {
		return nil, err
	}
	for _, ms := range spec.Maps {
		ms.Pinning = ebpf.PinNone
	}
	var objs bpfObjects
	if parallel {
		var lt *later
		if lt, err = loadObjects(spec, &ebpf.CollectionOptions{}, &objs); err == nil {
			lt.Close()
		}
	} else {
		err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{})
	}
	if err != nil {
		return nil, err
	}
	o := &LoadedObject{Maps: map[string]ebpf.MapID{}, ProgramMaps: map[string][]ebpf.MapID{}, Verified: map[string]uint32{}, Close: func() { objs.Close() }}
	for name, m := range objs.bpfMaps.byName() {
		info, err := m.Info()
		if err != nil {
			o.Close()
			return nil, err
		}
		o.Maps[name], _ = info.ID()
	}
	for name, p := range objs.bpfPrograms.byName() {
		if slices.Contains(onDemand, name) {
			continue // loaded at start by LoadAndAssign only
		}
		if p == nil {
			o.Close()
			return nil, fmt.Errorf("program %s not loaded", name)
		}
		info, err := p.Info()
		if err != nil {
			o.Close()
			return nil, err
		}
		o.ProgramMaps[name], _ = info.MapIDs()
		o.Verified[name], _ = info.VerifiedInstructions()
	}
	return o, nil
}

// ProgramGroups is how loadObjects splits the object's programs into n.
func ProgramGroups(n int) ([][]string, map[string]int, error) {
	spec, err := loadBpf()
	if err != nil {
		return nil, nil, err
	}
	sizes := map[string]int{}
	maps.DeleteFunc(spec.Programs, func(name string, _ *ebpf.ProgramSpec) bool { return slices.Contains(onDemand, name) })
	for name, p := range spec.Programs {
		sizes[name] = len(p.Instructions)
	}
	return programGroups(spec, n), sizes, nil
}
