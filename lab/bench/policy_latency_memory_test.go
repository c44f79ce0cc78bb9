package bench

import (
	"strings"
	"testing"
)

// The memory table gives the heap per policy as each stage's growth over
// the stage before, per policy added: none for the first stage, whose
// growth over the pods alone is mostly what having any policy costs.
func TestPolicyLatencyHeapPerAddedPolicy(t *testing.T) {
	r := &PolicyLatencyReport{HeapNoPoliciesMB: 1.9}
	for _, p := range []PolicyLatencyPoint{{Policies: 10, HeapMB: 3.1}, {Policies: 100, HeapMB: 3.5}, {Policies: 1000, HeapMB: 3.4}} {
		p.KBPerAddedPolicy = kbPerAddedPolicy(r.Points, p)
		r.Points = append(r.Points, p)
	}
	if r.Points[0].KBPerAddedPolicy != nil {
		t.Errorf("the first stage: %.2f KB per added policy, want none", *r.Points[0].KBPerAddedPolicy)
	}
	if got, want := r.Points[1].KBPerAddedPolicy, 0.4*1024/90; got == nil || *got < want-0.01 || *got > want+0.01 {
		t.Errorf("100 policies after 10: %v KB per added policy, want %.2f", got, want)
	}
	md := r.Markdown()
	for _, want := range []string{"| 10 | 0 | 0 | 0 | 0 | 3.1 | – |", "| 100 | 0 | 0 | 0 | 0 | 3.5 | 4.6 |",
		"| 1000 | 0 | 0 | 0 | 0 | 3.4 | below the heap's noise |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the memory table has no row %q:\n%s", want, md[strings.Index(md, "## Memory"):])
		}
	}
}
