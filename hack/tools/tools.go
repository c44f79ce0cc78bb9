//go:build tools

// Package tools pins the Kubernetes and etcd binaries netcube tests and
// benchmarks against, built from the Go module proxy by hack/build-tools.sh:
// kube-apiserver and kube-proxy at the same minor version as our client-go,
// and the etcd that this Kubernetes release is tested with.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
