package bench

// Reading an agent's log for its initial sync: the line it writes once
// every Service is applied carries the apply's figures and, from the
// Kubernetes source, the lists' time split (sync and compare read it).

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// agentSync is what an agent's log says of its initial sync.
type agentSync struct {
	loaded  time.Time     // when it logged "datapath loaded" (zero: not logged)
	applied time.Time     // when it logged "initial sync applied"
	apply   time.Duration // computing and writing every Service, after the lists
	wall    time.Duration // from the first object's arrival to applied
	updates int           // map updates of the apply
	split   SyncSplit
}

var (
	appliedRe = regexp.MustCompile(`(?m)^.*msg="initial sync applied".*$`)
	loadedRe  = regexp.MustCompile(`(?m)^.*msg="datapath loaded".*$`)
	updatesRe = regexp.MustCompile(`map_ops="\{Updates:(\d+) Deletes:\d+\}"`)
)

// parseAgentSync reads the first initial sync in log (slog text lines).
func parseAgentSync(log []byte) (agentSync, error) {
	line := appliedRe.Find(log)
	if line == nil {
		return agentSync{}, fmt.Errorf("no initial sync line")
	}
	secs := func(l []byte, name string) (float64, bool) {
		m := regexp.MustCompile(` ` + name + `=([0-9.e+-]+)`).FindSubmatch(l)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		return v, err == nil
	}
	var s agentSync
	var err error
	if s.applied, err = lineTime(line); err != nil {
		return s, err
	}
	if l := loadedRe.Find(log[:bytes.Index(log, line)]); l != nil {
		s.loaded, _ = lineTime(l)
	}
	apply, ok := secs(line, "apply_seconds")
	wall, ok2 := secs(line, "first_event_to_applied_seconds")
	m := updatesRe.FindSubmatch(line)
	if !ok || !ok2 || m == nil {
		return s, fmt.Errorf("initial sync line without apply_seconds, first_event_to_applied_seconds or map_ops: %s", line)
	}
	s.apply, s.wall = time.Duration(apply*float64(time.Second)), time.Duration(wall*float64(time.Second))
	s.updates, _ = strconv.Atoi(string(m[1]))
	// The lists' phases come from the Kubernetes source only (0 if absent).
	list, _ := secs(line, "list_seconds")
	decode, _ := secs(line, "decode_seconds")
	convert, _ := secs(line, "convert_seconds")
	writes, _ := secs(line, "map_write_seconds")
	s.split = SyncSplit{ListMS: list * 1e3, DecodeMS: decode * 1e3, ConvertMS: convert * 1e3,
		ComputeMS: max(0, ms(s.apply)-writes*1e3), MapWriteMS: writes * 1e3}
	return s, nil
}

var timeRe = regexp.MustCompile(`(?:^|\s)time=(\S+)`)

// lineTime is an slog text line's time.
func lineTime(line []byte) (time.Time, error) {
	m := timeRe.FindSubmatch(line)
	if m == nil {
		return time.Time{}, fmt.Errorf("log line without a time: %s", line)
	}
	return time.Parse(time.RFC3339Nano, string(m[1]))
}
