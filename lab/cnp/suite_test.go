package cnp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/netcube/netcube/lab/images"
)

// moduleDir is the suite's module at Version, from the Go module proxy
// (or the module cache).
func moduleDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", Module+"@"+Version)
	cmd.Dir = "/" // the version asked for, whatever a go.mod pins
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s", Module, Version, err, out)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download -json: %v %s\n%s", err, m.Error, out)
	}
	return m.Dir
}

// TestSuiteImagesAreImported: every image the suite's pods name is one
// the sandbox imports under that name (nothing can be pulled).
func TestSuiteImagesAreImported(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(moduleDir(t), "conformance", "base", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the suite's base manifests: %v (%d files)", err, len(files))
	}
	image := regexp.MustCompile(`(?m)^\s*image:\s*(\S+)`)
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range image.FindAllSubmatch(b, -1) {
			seen++
			if string(m[1]) != images.CNPSuiteAgnhostRef {
				t.Errorf("%s names image %s; the sandbox imports only %s for the suite (images.CNPSuiteAgnhostRef)", filepath.Base(f), m[1], images.CNPSuiteAgnhostRef)
			}
		}
	}
	if seen == 0 {
		t.Error("the suite's base manifests name no image: has the suite moved its pods?")
	}
}

// TestVersionsAgree: the build script builds the suite of Version, and
// the chart's CRD is that version's (its bundle-version annotation; deploy's
// test holds the file to upstream's byte for byte).
func TestVersionsAgree(t *testing.T) {
	script, err := os.ReadFile("../../hack/build-cnp-conformance.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := "VERSION=${CNP_CONFORMANCE_VERSION:-" + Version + "}"; !strings.Contains(string(script), want) {
		t.Errorf("hack/build-cnp-conformance.sh does not build %s (no %q)", Version, want)
	}
	crd, err := os.ReadFile("../../deploy/helm/netcube/crds/policy.networking.k8s.io_clusternetworkpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "policy.networking.k8s.io/bundle-version: " + Version + "\n"; !strings.Contains(string(crd), want) {
		t.Errorf("the chart's ClusterNetworkPolicy CRD is not bundle %s", Version)
	}
}

// TestSmokeTestsExistWithoutSCTP: each test of Smoke is one of the
// suite's (a renamed test fails here, not silently), and none probes SCTP
// (it could not pass here).
func TestSmokeTestsExistWithoutSCTP(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(moduleDir(t), "conformance", "tests", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	shortName := regexp.MustCompile(`ShortName:\s*"(\w+)"`)
	found := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range shortName.FindAllSubmatch(b, -1) {
			found[string(m[1])] = string(b)
		}
	}
	if len(found) < 30 {
		t.Errorf("found %d of the suite's tests, expected its 30", len(found))
	}
	for _, name := range Smoke {
		src, ok := found[name]
		switch {
		case !ok:
			t.Errorf("the suite has no test %s", name)
		case strings.Contains(strings.ToLower(src), `"sctp"`):
			t.Errorf("%s's file probes SCTP, which this kernel cannot", name)
		}
	}
}
