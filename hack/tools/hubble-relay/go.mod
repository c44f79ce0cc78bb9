// Separate module so cilium's dependency graph never touches netcube's
// go.mod, and the hubble CLI's cache (hack/tools/hubble) stays valid; the
// same cilium as that CLI's.
module github.com/netcube/netcube/hack/tools/hubble-relay

go 1.26.8

tool github.com/cilium/cilium/hubble-relay

require github.com/cilium/cilium v1.20.2
