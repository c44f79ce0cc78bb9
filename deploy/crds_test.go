package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// cnpCRD is the chart's ClusterNetworkPolicy CRD, under its upstream name.
const cnpCRD = "helm/netcube/crds/policy.networking.k8s.io_clusternetworkpolicies.yaml"

// upstreamCRD is where sigs.k8s.io/network-policy-api keeps the CRD of
// the experimental channel (named ports and node peers, which netcube
// implements; the standard channel's CRD prunes those fields).
const upstreamCRD = "config/crd/experimental/policy.networking.k8s.io_clusternetworkpolicies.yaml"

// TestClusterNetworkPolicyCRDIsUpstreams: the chart's ClusterNetworkPolicy
// CRD is the upstream file, byte for byte, at the bundle version it
// declares (the annotation the conformance suite's report checks). The
// upstream file comes from the Go module proxy (`go mod download`, or
// the module cache), not from a copy kept here: a CRD edited by hand, or
// a version bumped without the file, fails.
func TestClusterNetworkPolicyCRDIsUpstreams(t *testing.T) {
	ours, err := CRDs.ReadFile(cnpCRD)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^    policy\.networking\.k8s\.io/bundle-version: (v\S+)$`).FindSubmatch(ours)
	if m == nil {
		t.Fatalf("%s has no policy.networking.k8s.io/bundle-version annotation", cnpCRD)
	}
	version := string(m[1])
	if !bytes.Contains(ours, []byte("\n    policy.networking.k8s.io/channel: experimental\n")) {
		t.Errorf("%s is not the experimental channel's CRD: the suite's named-port and node-peer tests need its fields", cnpCRD)
	}
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/network-policy-api@"+version)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go mod download sigs.k8s.io/network-policy-api@%s: %v\n%s%s", version, err, out, stderr)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	if mod.Error != "" || mod.Dir == "" {
		t.Fatalf("go mod download sigs.k8s.io/network-policy-api@%s: %s", version, mod.Error)
	}
	theirs, err := os.ReadFile(filepath.Join(mod.Dir, upstreamCRD))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, theirs) {
		t.Errorf("deploy/%s differs from %s of sigs.k8s.io/network-policy-api@%s: copy it again (cp %s deploy/%s) and run `make manifests`",
			cnpCRD, upstreamCRD, version, filepath.Join(mod.Dir, upstreamCRD), cnpCRD)
	}
}
