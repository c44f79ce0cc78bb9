// Command progdiff compares the programs of two BPF objects instruction by
// instruction (opcodes and constants), to show that a change to the C
// (moving code between headers, renaming, composing by inlined calls) left
// what the kernel runs unchanged:
//
//	git show <rev>:pkg/datapath/bpf_bpfel.o > /tmp/old.o
//	go run ./hack/progdiff /tmp/old.o pkg/datapath/bpf_bpfel.o
//
// It exits 1 if any program differs or exists in one object only.
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: progdiff OLD.o NEW.o")
		os.Exit(2)
	}
	old, err := ebpf.LoadCollectionSpec(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cur, err := ebpf.LoadCollectionSpec(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var names []string
	for n := range old.Programs {
		names = append(names, n)
	}
	for n := range cur.Programs {
		if _, ok := old.Programs[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	differ := false
	for _, n := range names {
		a, b := old.Programs[n], cur.Programs[n]
		switch {
		case a == nil || b == nil:
			fmt.Printf("%-20s only in one object\n", n)
			differ = true
		case same(a.Instructions, b.Instructions):
			fmt.Printf("%-20s %5d instructions, identical\n", n, len(a.Instructions))
		default:
			fmt.Printf("%-20s %5d -> %d instructions, DIFFERENT\n", n, len(a.Instructions), len(b.Instructions))
			differ = true
		}
	}
	if differ {
		os.Exit(1)
	}
}

func same(a, b asm.Instructions) bool {
	return slices.EqualFunc(a, b, func(x, y asm.Instruction) bool {
		return x.OpCode == y.OpCode && x.Dst == y.Dst && x.Src == y.Src && x.Offset == y.Offset && x.Constant == y.Constant
	})
}
