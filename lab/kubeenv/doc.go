// Package kubeenv runs a real Kubernetes control plane on this machine: etcd
// and kube-apiserver built from the Go module proxy (hack/build-tools.sh),
// with certificates it generates, on loopback or inside a sandbox network
// namespace. Tests, `netcube-lab sandbox up --apiserver` and the sync benchmark
// use it. There is no controller-manager: EndpointSlices are written by
// whoever drives the cluster, as for Services without selectors.
package kubeenv
