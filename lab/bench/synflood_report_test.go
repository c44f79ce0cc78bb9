package bench

import (
	"encoding/xml"
	"strings"
	"testing"
)

// The report names its commit and shows, for each mode, what a user of
// the NodePort saw: established connections lost and new ones failed.
func TestSynFloodReport(t *testing.T) {
	r := &SynFloodReport{RunHeader: RunHeader{Commit: "abc1234", Command: "netcube-lab bench synflood", DurationS: 3}, TableSize: 1024, Rate: 1000, HeldConns: 10, NewEveryS: 0.1,
		Results: []SynFloodRun{
			{Run: 1, EarlyDrop: false, Sent: 3000, Held: 10, New: 30, NewFailed: 21, InsertFailed: 2000,
				PerSecond: []SynFloodSecond{{0, 9, 1, 0}, {1, 0, 10, 10}, {2, 0, 10, 10}}},
			{Run: 1, EarlyDrop: true, Sent: 3000, Held: 9, HeldLost: 1, HeldLostMax: 1, New: 30, EarlyDrops: 2500,
				PerSecond: []SynFloodSecond{{0, 10, 0, 0}, {1, 10, 0, 10}, {2, 10, 0, 9}}},
		}}
	md := r.Markdown()
	for _, want := range []string{"`abc1234`", "Early drop off: established connections lost **0**; new connections failed **21 of 30**",
		"Early drop on: established connections lost **1**; new connections failed **0 of 30**", "| 1 | on | 3000 | 9/10 | 1 (1) | 30 | 0 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if err := xml.Unmarshal([]byte(r.svg()), new(struct{})); err != nil {
		t.Errorf("plot is no SVG: %v", err)
	}
}
