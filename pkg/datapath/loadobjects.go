package datapath

// Loading the object's programs side by side. The verifier is most of an
// agent's start: from_pod and from_net take about half a second each here
// and the other programs a few milliseconds, and one LoadAndAssign
// verifies them one after the other on one CPU. Each program is verified
// on its own (privileged loads take no global verifier lock), so the maps
// are created first, once, and the programs then load in parallel
// against them.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
)

// maxLoaders bounds the programs verified at once: the verifier's memory
// for a large program is tens of MB.
const maxLoaders = 4

// onDemand are the programs loaded only once a pod needs them (onDemand.go):
// a netkit pod's, as large as from_pod, which a node of veth pods would
// otherwise verify at every start.
var onDemand = []string{"from_pod_netkit", "to_pod_netkit"}

// loadObjects creates spec's maps (pinned as opts says), then loads its
// programs but the onDemand ones in up to min(CPUs, maxLoaders) groups at
// once, and assigns both to objs as spec.LoadAndAssign would (the onDemand
// programs left nil). It returns what loading those later takes.
func loadObjects(spec *ebpf.CollectionSpec, opts *ebpf.CollectionOptions, objs *bpfObjects) (*later, error) {
	mapsOnly := spec.Copy()
	mapsOnly.Programs = nil
	mc, err := ebpf.NewCollectionWithOptions(mapsOnly, *opts)
	if err != nil {
		return nil, err
	}
	defer mc.Close() // what Assign does not take: maps no program names
	lt, err := newLater(opts, mc.Maps)
	if err != nil {
		return nil, err
	}
	spec = spec.Copy()
	maps.DeleteFunc(spec.Programs, func(name string, _ *ebpf.ProgramSpec) bool { return slices.Contains(onDemand, name) })
	groups := programGroups(spec, min(runtime.NumCPU(), maxLoaders))
	loaded := make([]*ebpf.Collection, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, names := range groups {
		wg.Go(func() {
			one := spec.Copy() // the loader must not share a spec between goroutines
			maps.DeleteFunc(one.Programs, func(name string, _ *ebpf.ProgramSpec) bool { return !slices.Contains(names, name) })
			// Every map, the constants' section included, is the one
			// created above (each group holds clones of their fds).
			loaded[i], errs[i] = ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{Programs: opts.Programs, MapReplacements: mc.Maps})
		})
	}
	wg.Wait()
	progs := map[string]*ebpf.Program{}
	for i, c := range loaded {
		if errs[i] != nil {
			continue
		}
		maps.Copy(progs, c.Programs)
		clear(c.Programs) // now progs' to close or assign
		c.Close()         // the cloned map fds
	}
	for _, err := range errs {
		if err != nil {
			closeAll(progs)
			lt.Close()
			return nil, err
		}
	}
	all := &ebpf.Collection{Maps: mc.Maps, Variables: mc.Variables}
	err = errors.Join(all.Assign(&objs.bpfMaps), all.Assign(&objs.bpfVariables), assignPrograms(&objs.bpfPrograms, progs))
	closeAll(progs) // programs the object has but objs does not name
	if err != nil {
		lt.Close()
		return nil, fmt.Errorf("the BPF object's programs: %w", err)
	}
	return lt, nil
}

// assignPrograms is Collection.Assign for the programs, which leaves the
// onDemand ones nil: each field of to gets the program its tag names,
// taken out of progs.
func assignPrograms(to *bpfPrograms, progs map[string]*ebpf.Program) error {
	v := reflect.ValueOf(to).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get("ebpf")
		p, ok := progs[name]
		if !ok && !slices.Contains(onDemand, name) {
			return fmt.Errorf("missing program %q", name)
		}
		v.Field(i).Set(reflect.ValueOf(p))
		delete(progs, name)
	}
	return nil
}

// programGroups splits spec's programs into at most n groups of about
// equal work, the largest programs first (instructions stand in for the
// verifier's time, which grows faster than them but in the same order).
func programGroups(spec *ebpf.CollectionSpec, n int) [][]string {
	names := slices.Collect(maps.Keys(spec.Programs))
	size := func(name string) int { return len(spec.Programs[name].Instructions) }
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(size(b), size(a)), cmp.Compare(a, b)) })
	n = max(1, min(n, len(names)))
	groups, work := make([][]string, n), make([]int, n)
	for _, name := range names {
		i := slices.Index(work, slices.Min(work))
		groups[i] = append(groups[i], name)
		work[i] += size(name)
	}
	return slices.DeleteFunc(groups, func(g []string) bool { return len(g) == 0 })
}

func closeAll(progs map[string]*ebpf.Program) {
	for _, p := range progs {
		if p != nil {
			p.Close()
		}
	}
}
