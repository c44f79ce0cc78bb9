package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/netcube/netcube/lab/kubeenv"
)

// suiteList is every test the full run selects (Focus), as ginkgo's
// dry-run names them: the e2e.test hack/build-e2e.sh builds (v1.36.3).
// With NETCUBE_E2E_DIR set, the tests below check it is still that
// suite's list; -update rewrites it from the suite.
const suiteList = "testdata/sig-network-tests.txt"

var update = flag.Bool("update", false, "rewrite "+suiteList+" from NETCUBE_E2E_DIR's e2e.test")

// selectedTests is the suite's list: from the built suite's dry-run when
// NETCUBE_E2E_DIR is set (and then equal to the committed list), else the
// committed list, so the check runs without the binaries too.
func selectedTests(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(suiteList)
	if err != nil {
		t.Fatal(err)
	}
	committed := strings.Split(strings.TrimSpace(string(b)), "\n")
	dir := os.Getenv("NETCUBE_E2E_DIR")
	if dir == "" {
		if *update {
			t.Fatal("-update needs NETCUBE_E2E_DIR")
		}
		t.Logf("NETCUBE_E2E_DIR unset: checking the committed list %s", suiteList)
		return committed
	}
	listed := dryRun(t, dir, "")
	if *update {
		if err := os.WriteFile(suiteList, []byte(strings.Join(listed, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return listed
	}
	if !slices.Equal(listed, committed) {
		t.Errorf("%s is not the suite's list (%d tests, the suite %d): run `go test ./lab/e2e -run TestSkips -update` with NETCUBE_E2E_DIR set, then review the skips", suiteList, len(committed), len(listed))
	}
	return listed
}

// dryRun lists the tests ginkgo would run of the suite in dir: the Focus
// ones, less those skip catches.
func dryRun(t *testing.T, dir, skip string) []string {
	t.Helper()
	out := t.TempDir()
	args := []string{"--dry-run", "--no-color", "--silence-skips", "--focus", Focus,
		"--json-report", "dry.json", "--output-dir", out}
	if skip != "" {
		args = append(args, "--skip", skip)
	}
	args = append(args, filepath.Join(dir, "e2e.test"), "--", "--provider", "skeleton")
	cmd, done, err := kubeenv.SuiteCommand(filepath.Join(dir, "ginkgo"), args...)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	cmd.Dir = out
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ginkgo --dry-run: %v\n%s", err, b)
	}
	rep, err := ReadReport(filepath.Join(out, "dry.json"), regexp.MustCompile(Focus))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rep.Specs {
		if s.State == "passed" { // a dry-run passes what it would run
			names = append(names, s.Name)
		}
	}
	return names
}

// TestSkipsCatchExactlyTheirTests: every skip pattern catches, of the
// tests the run selects, exactly the tests its reason names: not one a
// reason does not apply to (a pattern wider than its reason hides a test
// that could run), not fewer (a renamed test would run, and fail, for
// the reason it was skipped). No test is caught twice (each skipped test
// has one category), and every skip has one of the three categories.
func TestSkipsCatchExactlyTheirTests(t *testing.T) {
	selected := selectedTests(t)
	if len(selected) < 200 {
		t.Fatalf("%d tests selected: not the sig-network suite", len(selected))
	}
	caughtBy := map[string]string{}
	for _, s := range Skips {
		if !slices.Contains(Categories, s.Category) {
			t.Errorf("skip %q: category %q is none of %q", s.Pattern, s.Category, Categories)
		}
		if s.Reason == "" || len(s.Tests) == 0 {
			t.Errorf("skip %q names no reason or no tests", s.Pattern)
		}
		re := regexp.MustCompile(s.Pattern)
		for _, name := range selected {
			if !re.MatchString(name) {
				continue
			}
			if !slices.Contains(s.Tests, name) {
				t.Errorf("skip %q (%s) catches a test its reason does not name: %q", s.Pattern, s.Category, name)
			}
			if other, ok := caughtBy[name]; ok {
				t.Errorf("%q is caught by two skips, %q and %q", name, other, s.Pattern)
			}
			caughtBy[name] = s.Pattern
		}
		for _, name := range s.Tests {
			if !slices.Contains(selected, name) {
				t.Errorf("skip %q names %q, which the suite does not select", s.Pattern, name)
			} else if !re.MatchString(name) {
				t.Errorf("skip %q misses %q, a test its reason names", s.Pattern, name)
			}
		}
	}
	// What the issue un-skipped stays selected: these need no cloud, no
	// GCE and nothing the machine lacks.
	for _, want := range []string{
		"[sig-network] Services should serve endpoints on same port and different protocol for internal traffic on Type LoadBalancer",
		"[sig-network] IngressClass [Feature:Ingress] should set default value on new IngressClass [Serial]",
		"[sig-network] LoadBalancers [Feature:LoadBalancer] should only allow access from service loadbalancer source ranges [Slow]",
		"[sig-network] Topology Hints should distribute endpoints evenly",
	} {
		if !slices.Contains(selected, want) {
			t.Errorf("the suite does not select %q", want)
		} else if _, ok := SkippedBy(want); ok {
			t.Errorf("%q is skipped", want)
		}
	}
	if dir := os.Getenv("NETCUBE_E2E_DIR"); dir != "" {
		// ginkgo matches the pattern on the name as named here: what it
		// would run is the selection less what the skips catch.
		var want []string
		for _, name := range selected {
			if _, ok := caughtBy[name]; !ok {
				want = append(want, name)
			}
		}
		if got := dryRun(t, dir, SkipPattern()); !slices.Equal(got, want) {
			t.Errorf("ginkgo --skip runs %d tests, the skips' own matching %d", len(got), len(want))
		}
	}
}

// TestSmokeIsSelectedAndNotSkipped: the smoke focus selects exactly the
// smoke tests, each one selected test (a renamed upstream test fails
// here), none a skip catches.
func TestSmokeIsSelectedAndNotSkipped(t *testing.T) {
	selected := selectedTests(t)
	focus := regexp.MustCompile(SmokeFocus())
	n := 0
	for _, name := range selected {
		if focus.MatchString(name) {
			n++
		}
	}
	if n != len(Smoke) {
		t.Errorf("the smoke focus selects %d tests, want the %d smoke tests", n, len(Smoke))
	}
	for _, s := range Smoke {
		re := regexp.MustCompile(regexp.QuoteMeta(s))
		n := 0
		for _, name := range selected {
			if re.MatchString(name) {
				n++
				if skip, ok := SkippedBy(name); ok {
					t.Errorf("smoke test %q is skipped by %q", name, skip.Pattern)
				}
			}
		}
		if n != 1 {
			t.Errorf("smoke test %q names %d selected tests, want 1", s, n)
		}
	}
}
