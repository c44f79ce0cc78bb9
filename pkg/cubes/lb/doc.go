// Package lb is the load-balancer cube's Go side (its C side is
// bpf/cubes/lb: lb_maps.h, lb.h, and socket-LB's sock_maps.h, sock.h).
//
// It owns the cube's maps (register.go lists them) and everything that
// decides what goes in them:
//
//   - frontends.go: a Service and its EndpointSlices -> frontends and their
//     backends (traffic policies, topology hints, terminating endpoints);
//   - reconciler.go, owners.go: the stream of Service and EndpointSlice
//     changes -> per-Service syncs, in the manner of kube-proxy's change
//     trackers (a change marks its Service dirty; a sync recomputes and
//     diffs only that Service), and who owns a frontend two Services claim;
//     byname.go: their indexes by namespace and name, compact at 100,000
//     Services;
//   - cube.go, backends.go, batch.go, affinity.go, maglev.go, ranges.go:
//     "frontend F has backends B" -> the few map writes that change, in an
//     order that never lets a packet see a half-written Service and that a
//     retry completes; restore.go rebuilds the view after an agent restart;
//   - retired.go: a TCP or SCTP backend removed from every frontend stays
//     for its established connections until conntrack's GC finds none;
//   - udpclose.go: socket-LB's connected UDP sockets of a backend that left
//     are closed (bpf/entry/sock_destroy.c's iterator);
//   - metrics.go: sync latency, errors, map fill.
//
// It does not read Kubernetes API types (package k8s converts them).
package lb
