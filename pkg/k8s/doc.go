// Package k8s translates Kubernetes Service and EndpointSlice objects into
// netcube's model (frontends and their ready backends), following
// kube-proxy's semantics, and validates them. It is pure: no API calls, no
// maps. Sources feed it; the reconciler calls it for one Service at a time.
package k8s
