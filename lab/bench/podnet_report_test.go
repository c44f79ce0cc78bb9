package bench

import (
	"strings"
	"testing"

	"github.com/netcube/netcube/lab/bench/native"
)

// The bare-pair target compares netcube-native's same-node medians with
// the pair's from the same runs, shows the pair's own spread, and says
// "missing" rather than met or not when the pair was not measured.
func TestBareTarget(t *testing.T) {
	runs := func(xs ...float64) []native.Result {
		var out []native.Result
		for _, x := range xs {
			out = append(out, native.Result{PerSec: x})
		}
		return out
	}
	point := func(peer, fam string, crr, rr []native.Result) PodnetPoint {
		return PodnetPoint{Peer: peer, Family: fam, Placement: "same-node", CRR: crr, RR: rr}
	}
	report := func(ncCRR float64) *PodnetReport {
		r := &PodnetReport{}
		for _, fam := range []string{"IPv4", "IPv6"} {
			r.Points = append(r.Points,
				point(BareVeth, fam, runs(100, 110, 120), runs(1000, 1000, 1200)),
				point(PeerNetcubeNative, fam, runs(ncCRR, ncCRR, ncCRR), runs(980, 990, 1000)))
		}
		return r
	}
	if got := report(108).bareTarget(); got.met != "**yes**" || !strings.Contains(got.measured, "IPv4 conn/s 0.98× (pair's runs spread 20%)") || !strings.Contains(got.measured, "IPv6 trans/s 0.99×") {
		t.Errorf("at 0.98× and 0.99×: %+v, want met, with the pair's spread", got)
	}
	if got := report(90).bareTarget(); got.met != "no" || !strings.Contains(got.measured, "IPv4 conn/s 0.82×") {
		t.Errorf("at 0.82×: %+v, want not met", got)
	}
	r := report(108)
	r.Points = r.Points[1:] // IPv4's pair not measured
	if got := r.bareTarget(); got.met != "missing" {
		t.Errorf("without IPv4's pair: %+v, want missing", got)
	}
	if md := report(108).Markdown(); !strings.Contains(md, "IPv4 110 [100–120] conn/s and 1000 [1000–1200] trans/s") {
		t.Errorf("the report does not give the pair's figures:\n%s", md)
	}
}
