package main

import (
	"fmt"
	"os"
	"sort"

	"github.com/cilium/ebpf"
)

func main() {
	a, err := ebpf.LoadCollectionSpec(os.Args[1])
	if err != nil {
		panic(err)
	}
	b, err := ebpf.LoadCollectionSpec(os.Args[2])
	if err != nil {
		panic(err)
	}
	var names []string
	for n := range a.Programs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pa, pb := a.Programs[n], b.Programs[n]
		same := len(pa.Instructions) == len(pb.Instructions)
		if same {
			for i := range pa.Instructions {
				if pa.Instructions[i].OpCode != pb.Instructions[i].OpCode || pa.Instructions[i].Constant != pb.Instructions[i].Constant {
					same = false
					break
				}
			}
		}
		fmt.Printf("%-20s %5d %5d identical=%v\n", n, len(pa.Instructions), len(pb.Instructions), same)
	}
}
