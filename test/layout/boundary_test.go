package layout

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/netcube/netcube/"

// outsideProduct are the trees the product must not depend on: the lab,
// the test helpers, the tests.
var outsideProduct = []string{"lab/", "internal/", "test/"}

// deps lists the packages the given patterns build, with all they import
// (tests excluded: a product package's test may use the lab's sandbox),
// as paths inside this module.
func deps(t *testing.T, patterns ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, patterns...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", patterns, err)
	}
	var own []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, module); ok {
			own = append(own, rel)
		}
	}
	return own
}

// crossings are the packages of pkgs that lie outside the product.
func crossings(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		if slices.ContainsFunc(outsideProduct, func(tree string) bool { return strings.HasPrefix(p, tree) }) {
			out = append(out, p)
		}
	}
	return out
}

// TestProductImportsNoLab: no package of the product, and no binary that
// runs in a cluster (the agent, the CNI plugin, the operator's CLI),
// depends on a package of the lab or a test helper.
func TestProductImportsNoLab(t *testing.T) {
	// Positive control: the lab's CLI does depend on the lab, and the
	// check sees it (a check that found nothing anywhere would prove
	// nothing).
	if got := crossings(deps(t, "./lab/cmd/netcube-lab")); !slices.Contains(got, "lab/sandbox") || !slices.Contains(got, "lab/bench") {
		t.Fatalf("the lab CLI's dependencies outside the product are %v: want lab/sandbox and lab/bench among them", got)
	}
	for _, patterns := range [][]string{
		{"./cmd/netcube-agent"},
		{"./cmd/netcube-cni"},
		{"./cmd/netcube"},
		{"./pkg/...", "./cmd/..."},
	} {
		own := deps(t, patterns...)
		if len(own) == 0 {
			t.Fatalf("go list -deps %v found no package of this module", patterns)
		}
		if bad := crossings(own); len(bad) > 0 {
			t.Errorf("%v depends on %v: the product must not import the lab or a test helper", patterns, bad)
		}
	}
}
