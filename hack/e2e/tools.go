//go:build tools

// Package e2e pins what the real-node sandbox and the upstream sig-network
// end-to-end suite need, built from the Go module proxy by
// hack/build-e2e.sh: kubelet and kube-scheduler (the nodes and the
// scheduler a cluster has before its network provider), agnhost and
// regression-issue-74839 (the suite's test images built here), the suite itself (e2e.test, from test/e2e) and the
// ginkgo runner. Kept apart from hack/tools so that pinning the suite does
// not rebuild the API server the rest of the tests use.
package e2e

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/regression-issue-74839"
)
