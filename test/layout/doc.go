// Package layout holds the tests that keep the repository's shape honest:
// the product (bpf/, cmd/, pkg/) never imports the lab (lab/) or a test
// helper (internal/, test/), the agent and the CNI plugin link neither,
// and every path docs/architecture.md names exists.
package layout
