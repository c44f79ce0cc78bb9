// Package cnp judges netcube's ClusterNetworkPolicy (Admin and Baseline
// tiers, policy.networking.k8s.io/v1beta1) with the upstream conformance
// suite of sigs.k8s.io/network-policy-api, which netcube did not write:
// `go test -c ./conformance` of the module (hack/build-cnp-conformance.sh,
// from the Go module proxy) runs against a live cluster, creates its pods
// (five namespaces, two agnhost pods each, one of them host-network), applies
// each test's policies through the API server and probes from inside the
// pods (kubelet exec of `agnhost connect`). Run streams the suite's result
// events (go tool test2json) into a Report; WriteMarkdown renders it: every
// test and subtest with its result, each failure's lines, each skip's
// reason, and the tests this machine cannot run (no SCTP in its kernel).
package cnp
