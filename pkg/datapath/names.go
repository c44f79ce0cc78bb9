package datapath

import (
	"reflect"

	"github.com/cilium/ebpf"
)

// The generated bpfMaps and bpfPrograms name each field after the object's
// map or program (its `ebpf` tag): indexing them by that tag lets the rest
// of the agent find maps by the names the C code gives them, with no list
// of names kept by hand.

func (m *bpfMaps) byName() map[string]*ebpf.Map { return byTag[*ebpf.Map](m) }

func (p *bpfPrograms) byName() map[string]*ebpf.Program { return byTag[*ebpf.Program](p) }

func byTag[T any](s any) map[string]T {
	v := reflect.ValueOf(s).Elem()
	out := map[string]T{}
	for i := range v.NumField() {
		if tag := v.Type().Field(i).Tag.Get("ebpf"); tag != "" {
			out[tag] = v.Field(i).Interface().(T)
		}
	}
	return out
}
