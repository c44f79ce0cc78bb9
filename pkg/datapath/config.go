package datapath

import "fmt"

// Config sizes the maps and says where they are pinned. The zero value of a
// size means "the default".
type Config struct {
	// PinDir holds the pinned maps and links, e.g. /sys/fs/bpf/netcube.
	PinDir string
	// MapSizes by map name (lb_services, lb_backends, lb_revnat, ct_flows, ...).
	MapSizes map[string]uint32
}

// MapSizeFlags names, for each map, the agent flag that sizes it; errors
// about a map point the user at its flag.
var MapSizeFlags = map[string]string{
	"lb_services":       "lb-service-map-size",
	"lb_backends":       "lb-backend-map-size",
	"lb_revnat":         "lb-revnat-map-size",
	"ct_flows":          "ct-map-size",
	"sock_revnat":       "sock-map-size",
	"sock_udp_backend":  "sock-map-size",
	"lb_affinity":       "affinity-map-size",
	"lb_affinity_match": "lb-backend-map-size",
}

// DefaultMapSizes are the sizes used when Config does not set one.
var DefaultMapSizes = map[string]uint32{
	"lb_services":       262144,
	"lb_backends":       131072,
	"lb_revnat":         65536,
	"ct_flows":          262144,
	"sock_revnat":       65536,
	"sock_udp_backend":  65536,
	"lb_affinity":       65536,
	"lb_affinity_match": 131072,
}

// MapFullError says that a map has no room left, and which flag sizes it.
type MapFullError struct {
	Map  string
	Size uint32
	Err  error
}

func (e *MapFullError) Error() string {
	return fmt.Sprintf("map %s is full (%d entries): raise --%s", e.Map, e.Size, MapSizeFlags[e.Map])
}

func (e *MapFullError) Unwrap() error { return e.Err }
