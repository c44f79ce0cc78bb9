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
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
)

// maxLoaders bounds the programs verified at once: the verifier's memory
// for a large program is tens of MB.
const maxLoaders = 4

// loadObjects creates spec's maps (pinned as opts says), then loads its
// programs in up to min(CPUs, maxLoaders) groups at once, and assigns
// both to objs as spec.LoadAndAssign would.
func loadObjects(spec *ebpf.CollectionSpec, opts *ebpf.CollectionOptions, objs *bpfObjects) error {
	mapsOnly := spec.Copy()
	mapsOnly.Programs = nil
	mc, err := ebpf.NewCollectionWithOptions(mapsOnly, *opts)
	if err != nil {
		return err
	}
	defer mc.Close() // what Assign does not take: maps no program names
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
			return err
		}
	}
	all := &ebpf.Collection{Programs: progs, Maps: mc.Maps, Variables: mc.Variables}
	if err := all.Assign(objs); err != nil {
		closeAll(progs)
		return fmt.Errorf("the BPF object's programs: %w", err)
	}
	closeAll(progs) // programs the object has but objs does not name
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
		p.Close()
	}
}
