// Package cubes is the registry of the datapath's cubes: the agent loads,
// sizes and starts each cube listed here, in this order, and the entry
// programs call the packet hooks of those that have some (cube.Hooked), in
// this order too (bpf/entry/cubes_gen.h, generated from this list). A new
// cube is its package under pkg/cubes, its headers under bpf/cubes, and
// one line here.
package cubes

//go:generate go run ./gen ../../bpf/entry/cubes_gen.h

import (
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/cubes/ct"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/cubes/monitor"
	"github.com/netcube/netcube/pkg/cubes/nat"
	"github.com/netcube/netcube/pkg/cubes/policy"
	"github.com/netcube/netcube/pkg/cubes/qos"
	"github.com/netcube/netcube/pkg/cubes/router"
)

// All are the registered cubes.
var All = []cube.Cube{
	ct.Cube{},
	nat.Cube{},
	monitor.Cube{},
	lb.Cube{},
	router.Cube{},
	policy.Cube{},
	qos.Cube{},
}
