// Package reconcile turns the stream of Service and EndpointSlice changes
// into load-balancer operations, one Service at a time, in the manner of
// kube-proxy's change trackers: a change marks its Service dirty, and a sync
// recomputes and diffs only the dirty Services. Nothing here rebuilds all
// Services on one change. It owns the agent's view of the cluster state and
// of what was applied per Service; the maps belong to the lb cube.
package reconcile
