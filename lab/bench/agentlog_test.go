package bench

import (
	"testing"
	"time"
)

// TestParseAgentSync reads an agent's log as it writes it: the first
// initial sync and the datapath load before it, lines of other kinds
// and of a later start ignored.
func TestParseAgentSync(t *testing.T) {
	log := `time=2026-11-27T11:50:30.100Z level=INFO msg="node" name=node1
time=2026-11-27T11:50:32.201Z level=INFO msg="datapath loaded" pins=/sys/fs/bpf/netcube/node1
time=2026-11-27T11:50:34.737Z level=INFO msg="initial sync applied" frontends=8 map_ops="{Updates:44 Deletes:0}" apply_seconds=1.5 first_event_to_applied_seconds=2.25 map_write_seconds=0.5 list_seconds=3.5 decode_seconds=1.75 convert_seconds=1e-01
time=2026-11-27T11:51:00.000Z level=INFO msg="datapath loaded" pins=/sys/fs/bpf/netcube/node1
time=2026-11-27T11:51:02.000Z level=INFO msg="initial sync applied" frontends=8 map_ops="{Updates:9 Deletes:0}" apply_seconds=9 first_event_to_applied_seconds=9 map_write_seconds=9
`
	s, err := parseAgentSync([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	if !s.loaded.Equal(at("2026-11-27T11:50:32.201Z")) || !s.applied.Equal(at("2026-11-27T11:50:34.737Z")) {
		t.Errorf("loaded %v, applied %v: want the first start's lines", s.loaded, s.applied)
	}
	if s.apply != 1500*time.Millisecond || s.wall != 2250*time.Millisecond || s.updates != 44 {
		t.Errorf("apply %v, wall %v, updates %d; want 1.5s, 2.25s, 44", s.apply, s.wall, s.updates)
	}
	want := SyncSplit{ListMS: 3500, DecodeMS: 1750, ConvertMS: 100, ComputeMS: 1000, MapWriteMS: 500}
	if s.split != want {
		t.Errorf("split %+v, want %+v", s.split, want)
	}

	if _, err := parseAgentSync([]byte("time=2026-11-27T11:50:32.201Z level=INFO msg=\"datapath loaded\"\n")); err == nil {
		t.Error("a log without an initial sync parsed")
	}
	if _, err := parseAgentSync([]byte(`time=2026-11-27T11:50:34.737Z level=INFO msg="initial sync applied" frontends=8` + "\n")); err == nil {
		t.Error("an initial sync line without its figures parsed")
	}
}
