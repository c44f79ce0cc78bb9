package report

import (
	"testing"
)

type sink struct{ got []string }

func (s *sink) Warn(obj Object, reason Reason, message string) {
	s.got = append(s.got, obj.String()+" "+string(reason)+": "+message)
}

// TestReportedOnceClearedWhenFixed: a problem goes to the sink when it
// appears and when it changes, not when it is repeated; the gauge counts
// what stands now.
func TestReportedOnceClearedWhenFixed(t *testing.T) {
	s := &sink{}
	r := &Reporter{Sink: s}
	svc := Object{"Service", "default", "web"}
	r.Set(svc, InvalidField, "spec.externalIPs[0]: bad")
	r.Set(svc, InvalidField, "spec.externalIPs[0]: bad") // a relist
	r.Set(svc, FrontendConflict, "10.0.0.1:80/TCP is also claimed by default/old")
	if c := r.Count(); c[InvalidField] != 1 || c[FrontendConflict] != 1 {
		t.Fatalf("count %v", c)
	}
	r.Set(svc, InvalidField, "spec.externalIPs[0]: worse")
	r.Clear(svc, InvalidField)
	r.Clear(svc, InvalidField)
	if c := r.Count(); c[InvalidField] != 0 || c[FrontendConflict] != 1 {
		t.Fatalf("count after clearing %v", c)
	}
	want := []string{
		"Service default/web InvalidField: spec.externalIPs[0]: bad",
		"Service default/web FrontendConflict: 10.0.0.1:80/TCP is also claimed by default/old",
		"Service default/web InvalidField: spec.externalIPs[0]: worse",
	}
	if len(s.got) != len(want) {
		t.Fatalf("sink got %q, want %q", s.got, want)
	}
	for i := range want {
		if s.got[i] != want[i] {
			t.Errorf("sink[%d] = %q, want %q", i, s.got[i], want[i])
		}
	}
	var nilReporter *Reporter
	nilReporter.Set(svc, InvalidField, "ignored") // must not panic
}
