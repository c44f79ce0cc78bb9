// Package e2e runs the upstream Kubernetes end-to-end suite's
// [sig-network] tests (e2e.test, built from k8s.io/kubernetes/test/e2e by
// hack/build-e2e.sh) against a sandbox with real nodes (netcube-lab sandbox up
// --kubelet), and turns ginkgo's JSON report into the conformance report
// (docs/conformance/sig-network.md): every test with its result and time,
// the counts, each skip with the reason the sandbox cannot run it, and
// each known failure with its explanation.
package e2e
