package datapath

import "github.com/netcube/netcube/pkg/cube"

// Config says where the maps are pinned and how big they are.
type Config struct {
	// PinDir holds the pinned maps and links, e.g. /sys/fs/bpf/netcube.
	PinDir string
	// Cubes are the cubes whose maps are sized as they declare (and whose
	// size flags errors name); other maps keep the object's sizes.
	Cubes []cube.Cube
	// MapSizes by map name override the cubes' defaults; 0 = default.
	MapSizes map[string]uint32
	// Variables are the object's constants (volatile const) to set, by
	// name, e.g. conntrack's timeouts; others keep their compiled value.
	Variables map[string]any
}
