package cnp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// stream writes test2json events as the suite's run makes them.
type stream struct{ b bytes.Buffer }

func (s *stream) ev(action, test, output string, elapsed float64) *stream {
	e, _ := json.Marshal(map[string]any{"Action": action, "Package": Module + "/conformance", "Test": test, "Output": output, "Elapsed": elapsed})
	s.b.Write(append(e, '\n'))
	return s
}

func (s *stream) out(test string, lines ...string) *stream {
	for _, l := range lines {
		s.ev("output", test, l+"\n", 0)
	}
	return s
}

// probeFailed is what doPokeServer logs of each try of a probe that does
// not answer as expected.
func probeFailed(test, proto, stderr string, tries int) []string {
	var out []string
	for range tries {
		out = append(out, "    helper.go:97: FAILED Command was [/agnhost connect --timeout=3s --protocol="+proto+" 10.244.1.5:9003]",
			"    helper.go:104: Expected connection to be dropped from ns/pod-0 to 10.244.1.5, but instead it returned a different status: "+stderr)
	}
	return out
}

// TestParseClassifies: passes, failures, a failure at an SCTP probe the
// kernel refused (cannot run here) and one the datapath answered (a
// failure), parents from their subtests, and a skip with its reason.
func TestParseClassifies(t *testing.T) {
	const root = Root
	tcp, sctp := root+"/CNPAdminTierEgressTCP", root+"/CNPAdminTierEgressSCTP"
	s := &stream{}
	s.ev("run", root, "", 0).out(root, "=== RUN   "+root, "    suite.go:160: Test Setup: Applying base manifests")
	s.ev("run", tcp, "", 0).out(tcp, "=== RUN   "+tcp)
	s.ev("run", tcp+"/allow", "", 0).ev("pass", tcp+"/allow", "", 1.5)
	s.ev("run", tcp+"/deny", "", 0).out(tcp+"/deny", "=== RUN   "+tcp+"/deny")
	s.out(tcp+"/deny", "    helper.go:97: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.244.1.5:80]",
		"    helper.go:98: Expected connection to fail from ns/pod-0 to 10.244.1.5, but instead it successfully connected.",
		"    helper.go:97: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.244.1.5:80]",
		"    helper.go:98: Expected connection to fail from ns/pod-0 to 10.244.1.5, but instead it successfully connected.",
		"    helper.go:72: ", "        \tError Trace:\t/x/helper.go:72", "        \tError:      \tCondition never satisfied",
		"--- FAIL: "+tcp+"/deny (10.00s)")
	s.ev("fail", tcp+"/deny", "", 10)
	s.ev("fail", tcp, "", 11.5)
	s.ev("run", sctp, "", 0)
	s.ev("run", sctp+"/allow", "", 0).out(sctp+"/allow", probeFailed(sctp+"/allow", "sctp", "OTHER: protocol not supported", 20)...)
	s.ev("fail", sctp+"/allow", "", 10)
	// An SCTP probe a datapath answered (a reset): a failure, not the kernel.
	s.ev("run", sctp+"/deny", "", 0).out(sctp+"/deny", probeFailed(sctp+"/deny", "sctp", "REFUSED", 3)...)
	s.ev("fail", sctp+"/deny", "", 10)
	s.ev("fail", sctp, "", 20)
	nosctp := root + "/CNPBaselineTierIngressSCTP"
	// A test's own progress lines (what it applies and deletes) are not failures of its own.
	s.ev("run", nosctp, "", 0).out(nosctp, "    suite.go:221: Applying base/baseline_tier/standard-ingress-sctp-rules.yaml",
		"    apply.go:146: Creating ingress-sctp ClusterNetworkPolicy", "    apply.go:154: Deleting ingress-sctp ClusterNetworkPolicy")
	s.ev("run", nosctp+"/allow", "", 0).out(nosctp+"/allow", probeFailed("", "sctp", "OTHER: protocol not supported", 2)...)
	s.ev("fail", nosctp+"/allow", "", 10).ev("pass", nosctp+"/x", "", 1).ev("fail", nosctp, "", 11)
	named := root + "/CNPAdminTierEgressNamedPort"
	s.ev("run", named, "", 0).out(named, "    suite.go:205: Skipping CNPAdminTierEgressNamedPort: suite does not support ClusterNetworkPolicyNamedPorts",
		"--- SKIP: "+named+" (0.00s)").ev("skip", named, "", 0)
	s.out(root, "--- FAIL: "+root+" (80.00s)").ev("fail", root, "", 80)

	p := NewParser()
	var done []string
	p.Done = func(t *Test) { done = append(done, t.Name+"="+t.Result) }
	if err := p.Read(&s.b); err != nil {
		t.Fatal(err)
	}
	tests, setup := p.Tests()
	if len(setup) != 0 {
		t.Errorf("setup failure %q: the subtests explain the root's", setup)
	}
	want := "CNPAdminTierEgressTCP=failed CNPAdminTierEgressSCTP=failed CNPBaselineTierIngressSCTP=cannot run here CNPAdminTierEgressNamedPort=skipped"
	if got := strings.Join(done, " "); got != want {
		t.Errorf("as they ended: %s, want %s", got, want)
	}
	byName := map[string]*Test{}
	for _, tt := range tests {
		byName[tt.Name] = tt
	}
	if s := byName["CNPAdminTierEgressSCTP"].Subtests; s[0].Result != NoSCTP || s[0].Reason != NoSCTPReason || s[1].Result != Failed {
		t.Errorf("SCTP subtests: %+v %+v", s[0], s[1])
	}
	deny := byName["CNPAdminTierEgressTCP"].Subtests[1]
	if deny.Result != Failed || len(deny.Failure) != 5 || !strings.HasSuffix(deny.Failure[0], "10.244.1.5:80]  [x2]") {
		t.Errorf("the TCP deny's failure lines (each once, with its count): %q", deny.Failure)
	}
	if r := byName["CNPAdminTierEgressNamedPort"].Reason; r != "Skipping CNPAdminTierEgressNamedPort: suite does not support ClusterNetworkPolicyNamedPorts" {
		t.Errorf("skip reason %q", r)
	}
	rep := &Report{Tests: tests, Suite: Module + "@" + Version, RunFlag: "^TestConformance$"}
	tc, sc := rep.Totals()
	if tc != (Counts{Failed: 2, NoSCTP: 1, Skipped: 1}) || sc != (Counts{Passed: 2, Failed: 2, NoSCTP: 2}) {
		t.Errorf("totals %+v %+v", tc, sc)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"**0 of 4 tests passed**, 2 failed, 1 " + NoSCTPReason, "### CNPAdminTierEgressTCP / deny",
		"- CNPBaselineTierIngressSCTP / allow: " + NoSCTPReason, "- CNPAdminTierEgressNamedPort: Skipping", "Condition never satisfied"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("the report lacks %q:\n%s", w, b.String())
		}
	}
}

// TestParseSetupFailure: the suite's pods never ready: the root fails on
// its own, and the report says so rather than passing on no tests.
func TestParseSetupFailure(t *testing.T) {
	s := &stream{}
	s.ev("run", Root, "", 0).out(Root, "    helper.go:160: StatefulSet replicas in namespace x not rolled out yet. 0/2 replicas are available.",
		"    helper.go:168: ", "        \tError:      \tReceived unexpected error:", "        \t            \tcontext deadline exceeded").ev("fail", Root, "", 300)
	p := NewParser()
	if err := p.Read(&s.b); err != nil {
		t.Fatal(err)
	}
	tests, setup := p.Tests()
	rep := &Report{Tests: tests, Setup: setup}
	if len(tests) != 0 || len(setup) == 0 || !strings.Contains(strings.Join(setup, "\n"), "context deadline exceeded") || !rep.Failed() {
		t.Errorf("tests %v, setup %q", tests, setup)
	}
}

// TestRunPattern: --match and the smoke list select the suite's tests
// under TestConformance, never together.
func TestRunPattern(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "^TestConformance$"},
		{Options{Match: "CNPAdminTier.*TCP"}, "^TestConformance$/CNPAdminTier.*TCP"},
		{Options{Tests: Smoke}, "^TestConformance$/^(CNPAdminTierEgressTCP|CNPBaselineTierIngressTCP|CNPAdminTierIntegration)$"},
	} {
		if got, err := c.o.RunPattern(); err != nil || got != c.want {
			t.Errorf("%+v: %q %v, want %q", c.o, got, err, c.want)
		}
	}
	if _, err := (Options{Match: "x", Tests: Smoke}).RunPattern(); err == nil {
		t.Error("--match with the smoke list: no error")
	}
	if _, err := (Options{Match: "("}).RunPattern(); err == nil || !strings.Contains(err.Error(), "--match") {
		t.Errorf("a bad --match: %v", err)
	}
}

// TestSecondRunWithoutSCTPProbes: the tests that stopped at an SCTP probe
// are the ones run again; the second run's probes not made are counted
// per subtest and test, its failures fail the report, and the report
// shows both runs.
func TestSecondRunWithoutSCTPProbes(t *testing.T) {
	gress := Root + "/CNPAdminTierGress"
	first := &stream{}
	first.ev("run", Root, "", 0).ev("run", Root+"/CNPAdminTierEgressTCP", "", 0).ev("pass", Root+"/CNPAdminTierEgressTCP", "", 5)
	first.ev("run", gress, "", 0).ev("run", gress+"/allow", "", 0).out(gress+"/allow", probeFailed("", "sctp", "OTHER: protocol not supported", 2)...)
	first.ev("fail", gress+"/allow", "", 10).ev("fail", gress, "", 10).ev("fail", Root, "", 20)
	p := NewParser()
	if err := p.Read(&first.b); err != nil {
		t.Fatal(err)
	}
	tests, _ := p.Tests()
	rep := &Report{Tests: tests, RunFlag: "^TestConformance$"}
	if got := rep.StoppedAtSCTP(); len(got) != 1 || got[0] != "CNPAdminTierGress" {
		t.Fatalf("to run again: %v, want the one test that stopped at SCTP", got)
	}
	if rep.Failed() {
		t.Fatal("a run whose only failure is SCTP's failed")
	}

	second := &stream{}
	notMade := "    helper.go:72: SCTP PROBE NOT MADE: ns/harry-potter-0 to 10.244.1.5 port 9003, want connect=true (NETCUBE_CNP_SCTP_PROBES=skip: no SCTP in this kernel)"
	second.ev("run", Root, "", 0).ev("run", gress, "", 0).ev("run", gress+"/allow", "", 0).out(gress+"/allow", notMade, notMade)
	second.ev("pass", gress+"/allow", "", 4).ev("run", gress+"/deny", "", 0)
	second.out(gress+"/deny", notMade, "    helper.go:97: FAILED Command was [/agnhost connect --timeout=3s --protocol=udp 10.244.1.5:53]",
		"    helper.go:72: ", "        \tError:      \tCondition never satisfied")
	second.ev("fail", gress+"/deny", "", 10).ev("fail", gress, "", 14).ev("fail", Root, "", 15)
	p2 := NewParser()
	if err := p2.Read(&second.b); err != nil {
		t.Fatal(err)
	}
	t2, _ := p2.Tests()
	rep.WithoutSCTPProbes = &Report{Tests: t2, RunFlag: "^TestConformance$/^(CNPAdminTierGress)$"}
	g := t2[0]
	if g.SCTPProbesNotMade != 3 || g.Subtests[0].SCTPProbesNotMade != 2 || g.Subtests[0].Result != Passed || g.Subtests[1].Result != Failed {
		t.Errorf("second run: %d probes not made (want 3), subtests %+v %+v", g.SCTPProbesNotMade, g.Subtests[0], g.Subtests[1])
	}
	if !rep.Failed() || rep.WithoutSCTPProbes.FailedTests() != 1 {
		t.Error("a UDP probe failing in the second run does not fail the report")
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"**0 of 1 tests passed, 1 failed; subtests 1 passed, 1 failed**, 3 SCTP probes not made",
		"## The same tests with SCTP probes not made", "| CNPAdminTierGress | **failed** | 1 | 1 | 3 |",
		"- CNPAdminTierGress / deny\n", "- CNPAdminTierGress / allow: passed, 2 SCTP probes not made"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("the report lacks %q:\n%s", w, b.String())
		}
	}
}
