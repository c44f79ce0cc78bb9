// Package netpol judges netcube's NetworkPolicy enforcement on a live
// cluster with cyclonus (github.com/mattfenwick/cyclonus), an independent
// implementation of the API's semantics: its generator's test cases
// (policies, label changes, pod and namespace churn) are applied through
// the API server, every step is probed with real connections between
// every pair of its 9 pods (3 namespaces x 3 pods, serving ports 80 and 81
// over TCP and UDP) from inside the pods (kubelet exec, cyclonus's worker
// running agnhost connect), and each probe is compared with what
// cyclonus's matcher computes. Run writes the results; WriteMarkdown the
// conformance summary per feature, as cyclonus prints it.
package netpol
