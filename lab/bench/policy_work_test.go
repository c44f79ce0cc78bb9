package bench

import (
	"strings"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/cubes/policy"
)

// TestPolicyWorkAlone: each kind of change is timed, with the keys it
// wrote; a new identity writes entries into the kernel's maps, and more
// with more policies in its namespace; the report marks a p99 over the
// target missed.
func TestPolicyWorkAlone(t *testing.T) {
	testenv.RequireRoot(t)
	small, err := measurePolicyWork(2, 10, 2, policy.SpreadSame, 10)
	if err != nil {
		t.Fatal(err)
	}
	large, err := measurePolicyWork(2, 10, 40, policy.SpreadSame, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != len(policy.ScaleChanges()) || len(large) != len(small) {
		t.Fatalf("%d and %d points, want one per kind of change (%d)", len(small), len(large), len(policy.ScaleChanges()))
	}
	for i, p := range large {
		if p.Keys <= 0 || p.TotalP50 <= 0 || p.TotalP99 < p.TotalP50 || p.TotalP99 < p.CompileP99 {
			t.Errorf("%s at %d policies: %+v: no keys or no time", p.Change, p.Policies, p)
		}
		if p.Change == "class" && p.Keys <= small[i].Keys {
			t.Errorf("a new identity wrote %.0f keys with %d policies and %.0f with %d: want more with more policies",
				p.Keys, p.Policies, small[i].Keys, small[i].Policies)
		}
	}

	var b strings.Builder
	workMarkdown(&b, []PolicyWorkPoint{{Policies: 10, Spread: "same", Change: "class", Keys: 9, TotalP99: 1},
		{Policies: 10000, Spread: "same", Change: "class", Keys: 1575, TotalP99: 7.5}}, 100)
	md := b.String()
	if !strings.Contains(md, "| 10 | same | class | 9 |") || !strings.Contains(md, "| met |") || !strings.Contains(md, "**missed**") {
		t.Errorf("the table lacks a row, a met or a missed mark:\n%s", md)
	}
}
