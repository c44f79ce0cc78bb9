// Command gen writes bpf/entry/cubes_gen.h from the cube registry, so that
// a cube's packet hooks reach the entry programs by its one registration
// line. Run by `go generate ./pkg/cubes` (make generate), before bpf2go.
package main

import (
	"log"
	"os"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: gen <path of cubes_gen.h>")
	}
	if err := os.WriteFile(os.Args[1], []byte(cube.CHeader(cubes.All)), 0o644); err != nil {
		log.Fatal(err)
	}
}
