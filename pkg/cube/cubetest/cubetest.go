// Package cubetest is a map layer in memory for testing cubes without root
// or a kernel (package memmaps, which hollow agents run on too), made in
// a test: a setup failure fails the test.
package cubetest

import (
	"testing"

	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cube/memmaps"
)

// Op is one map operation, as a fault sees it.
type Op = memmaps.Op

// Fake is the memory maps of one or more cubes.
type Fake = memmaps.Set

// New returns memory maps for the maps the cubes declare, sized as they
// declare or as sizes says (by map name).
func New(t testing.TB, sizes map[string]uint32, cubes ...cube.Cube) *Fake {
	t.Helper()
	f, err := memmaps.New(sizes, cubes...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
