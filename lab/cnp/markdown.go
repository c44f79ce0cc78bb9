package cnp

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Patch says what of the suite is changed to run here, and why
// (hack/build-cnp-conformance.sh applies it).
const Patch = "One change to the suite as it judges, to its pods and not to any test: the suite's base manifests run two `/agnhost porter` containers per pod " +
	"serving SCTP ports; on a kernel without SCTP porter exits at once, the containers crash-loop and no pod of the suite ever gets ready. " +
	"The patched command runs porter as before and, only when it exits and the kernel has no SCTP, pauses instead of exiting: " +
	"every TCP and UDP server is the suite's, and the SCTP probes still run (and fail here). The suite's pods run agnhost as the " +
	"sandbox builds it (Kubernetes v1.36.3's test/images/agnhost, with bash) under the tag the suite names, since nothing can be pulled."

// WriteMarkdown renders the report: totals, every test with its
// subtests' results, each failure's lines, what cannot run here and what
// was skipped, each with its reason.
func WriteMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	tests, subs := r.Totals()
	fmt.Fprintf(&b, "# ClusterNetworkPolicy: the upstream conformance suite on real nodes\n\n")
	fmt.Fprintf(&b, "Measured at commit `%s` on %s, by `%s`.\n\n", r.Meta.Commit, r.Meta.Date, r.Meta.Command)
	fmt.Fprintf(&b, "%s\n\n", r.Meta.Environment)
	fmt.Fprintf(&b, "The suite is `%s`'s `conformance` package (`go test -c`, built from the Go module proxy by "+
		"`hack/build-cnp-conformance.sh`), run as `conformance.test -test.run '%s' --supported-features=%s`: it creates its namespaces and pods, "+
		"applies each test's ClusterNetworkPolicies (and NetworkPolicies) through the API server and probes from inside the pods "+
		"(kubelet exec of `agnhost connect`, 3 s per try, retried for 10 s, then once more to confirm). A probe expected to be denied passes "+
		"only on a timeout: a reset or an ICMP error fails it.\n\n", r.Suite, r.RunFlag, strings.Join(r.Features, ","))
	fmt.Fprintf(&b, "%s\n\n", Patch)
	if w := r.WithoutSCTPProbes; w != nil {
		t2, s2 := w.Totals()
		fmt.Fprintf(&b, "The suite's tests probe SCTP between their TCP and UDP probes, and a probe that fails ends its subtest: here the first SCTP "+
			"probe of a subtest keeps every TCP and UDP probe after it from running. So the tests that stopped at one ran a second time, in the same "+
			"session, with the suite's SCTP probes not made (a second patch, inert unless `NETCUBE_CNP_SCTP_PROBES=skip` is set: the suite's "+
			"`PokeServer` logs such a probe and returns): **%d of %d tests passed, %d failed; subtests %d passed, %d failed**, %d SCTP probes not made "+
			"(%d of those tests, named for SCTP, probe nothing else and so made no probe: [below](#the-same-tests-with-sctp-probes-not-made)). "+
			"The first run is the judge; the second shows what the first could not.\n\n",
			t2.Passed, t2.Total(), t2.Failed, s2.Passed, s2.Failed, w.probesNotMade(), w.onlySCTPTests())
	}
	fmt.Fprintf(&b, "**%d of %d tests passed**, %d failed, %d %s, %d skipped; subtests: %d passed, %d failed, %d cannot run here, %d skipped. Wall time %s.\n\n",
		tests.Passed, tests.Total(), tests.Failed, tests.NoSCTP, NoSCTPReason, tests.Skipped,
		subs.Passed, subs.Failed, subs.NoSCTP, subs.Skipped, r.Wall.Round(time.Second))
	if len(r.Setup) > 0 {
		fmt.Fprintf(&b, "**The suite's setup failed** (no test could run as it should):\n\n```\n%s\n```\n\n", strings.Join(r.Setup, "\n"))
	}

	b.WriteString("## Tests\n\n| # | Test | Result | Subtests passed | failed | cannot run here | Seconds |\n|---:|---|---|---:|---:|---:|---:|\n")
	for i, t := range r.Tests {
		var c Counts
		for _, s := range t.Subtests {
			c.add(s.Result)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %d | %d | %.1f |\n", i+1, t.Name, resultCell(t), c.Passed, c.Failed, c.NoSCTP, t.Seconds)
	}

	b.WriteString("\n## Failures\n\n")
	failed := 0
	for _, t := range r.Tests {
		for _, f := range leaves(t, Failed) {
			failed++
			fmt.Fprintf(&b, "### %s\n\n", f.path)
			if len(f.test.Failure) > 0 {
				fmt.Fprintf(&b, "```\n%s\n```\n\n", strings.Join(f.test.Failure, "\n"))
			}
		}
	}
	if failed == 0 {
		b.WriteString("None.\n")
	}

	b.WriteString("\n## Cannot run on this machine\n\n")
	noSCTP := 0
	for _, t := range r.Tests {
		for _, f := range leaves(t, NoSCTP) {
			noSCTP++
			fmt.Fprintf(&b, "- %s: %s; it stopped at its first SCTP probe (the suite ends a test at the first probe that fails), so its probes after that one did not run.\n", f.path, f.test.Reason)
		}
	}
	if noSCTP == 0 {
		b.WriteString("None.\n")
	}

	b.WriteString("\n## Skipped\n\n")
	skipped := 0
	for _, t := range r.Tests {
		for _, f := range leaves(t, Skipped) {
			skipped++
			fmt.Fprintf(&b, "- %s: %s\n", f.path, f.test.Reason)
		}
	}
	if skipped == 0 {
		b.WriteString("None.\n")
	}

	if w := r.WithoutSCTPProbes; w != nil {
		writeWithoutSCTP(&b, w)
	}

	b.WriteString("\n## Subtests\n\n")
	for _, t := range r.Tests {
		if len(t.Subtests) == 0 {
			continue
		}
		fmt.Fprintf(&b, "**%s** (%s)\n\n", t.Name, t.Result)
		for _, s := range t.Subtests {
			fmt.Fprintf(&b, "- %s: %s (%.1f s)\n", Display(s.Name), resultCell(s), s.Seconds)
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeWithoutSCTP renders the second run: each test, its subtests, and
// every failure.
func writeWithoutSCTP(b *strings.Builder, w *Report) {
	b.WriteString("\n## The same tests with SCTP probes not made\n\n")
	fmt.Fprintf(b, "`%s` with `NETCUBE_CNP_SCTP_PROBES=skip`, wall time %s", w.RunFlag, w.Wall.Round(time.Second))
	if w.Meta.Commit != "" {
		fmt.Fprintf(b, "; at commit `%s` on %s, by `%s`", w.Meta.Commit, w.Meta.Date, w.Meta.Command)
	}
	b.WriteString(".\n\n")
	if len(w.Setup) > 0 {
		fmt.Fprintf(b, "**The suite's setup failed**:\n\n```\n%s\n```\n\n", strings.Join(w.Setup, "\n"))
	}
	b.WriteString("| Test | Result | Subtests passed | failed | SCTP probes not made | Seconds |\n|---|---|---:|---:|---:|---:|\n")
	for _, t := range w.Tests {
		var c Counts
		for _, s := range t.Subtests {
			c.add(s.Result)
		}
		result := resultCell(t)
		if onlySCTP(t) {
			result = "no probe made: " + result + " says nothing"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %.1f |\n", t.Name, result, c.Passed, c.Failed, t.SCTPProbesNotMade, t.Seconds)
	}
	b.WriteString("\nThe tests named for SCTP probe nothing but SCTP: in this run they made no probe, and their result says nothing. " +
		"The programs' verdicts on SCTP under ClusterNetworkPolicy are checked by `TestTiersInTheDatapath` (BPF_PROG_RUN of SCTP INITs).\n")
	failed := 0
	for _, t := range w.Tests {
		for _, f := range leaves(t, Failed) {
			if failed == 0 {
				b.WriteString("\nFailures:\n\n")
			}
			failed++
			fmt.Fprintf(b, "- %s\n", f.path)
			if len(f.test.Failure) > 0 {
				fmt.Fprintf(b, "\n```\n%s\n```\n\n", strings.Join(f.test.Failure, "\n"))
			}
		}
	}
	b.WriteString("\nSubtests:\n\n")
	for _, t := range w.Tests {
		for _, s := range t.Subtests {
			fmt.Fprintf(b, "- %s / %s: %s, %d SCTP probes not made\n", t.Name, Display(s.Name), resultCell(s), s.SCTPProbesNotMade)
		}
	}
}

// onlySCTP: the suite's tests named for SCTP (CNP*Tier{Egress,Ingress}SCTP)
// probe nothing else, so with SCTP probes not made they probe nothing.
func onlySCTP(t *Test) bool { return strings.HasSuffix(t.Name, "SCTP") }

// onlySCTPTests counts r's tests named for SCTP.
func (r *Report) onlySCTPTests() int {
	n := 0
	for _, t := range r.Tests {
		if onlySCTP(t) {
			n++
		}
	}
	return n
}

// probesNotMade counts r's SCTP probes not made.
func (r *Report) probesNotMade() int {
	n := 0
	for _, t := range r.Tests {
		n += t.SCTPProbesNotMade
	}
	return n
}

func resultCell(t *Test) string {
	switch t.Result {
	case Failed:
		return "**failed**"
	case NoSCTP, Skipped:
		return t.Result + ": " + t.Reason
	}
	return t.Result
}

// leaf is a test or subtest with its full name.
type leaf struct {
	path string
	test *Test
}

// leaves are the tests under t (t itself when it has none) of a result:
// where a test's result comes from.
func leaves(t *Test, result string) []leaf {
	var out []leaf
	var walk func(prefix string, t *Test)
	walk = func(prefix string, t *Test) {
		path := prefix + Display(t.Name)
		if len(t.Subtests) == 0 || (t.Result == result && len(t.Failure) > 0) {
			if t.Result == result {
				out = append(out, leaf{path, t})
			}
			if len(t.Subtests) == 0 {
				return
			}
		}
		for _, s := range t.Subtests {
			walk(path+" / ", s)
		}
	}
	walk("", t)
	return out
}
