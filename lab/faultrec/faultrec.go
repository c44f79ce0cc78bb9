// Package faultrec records what a fault test measured (connections held
// and lost, new connections and their errors, time to converge) for the
// reliability report: each record is logged, and appended as a JSON line
// to the file $NETCUBE_RELIABILITY_OUT names, if any (`make reliability`
// sets it, runs the fault tests in their long versions,
// $NETCUBE_RELIABILITY_LONG=1, and renders the file with `netcube-lab bench
// reliability`).
package faultrec

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

// Record is one fault, as one test saw it.
type Record struct {
	Fault string `json:"fault"`          // what was done, e.g. "agent kill -9 and restart"
	Path  string `json:"path,omitempty"` // socket-LB, tc, ...
	// Long-lived connections through the fault: still answering from
	// their backend, or broken (reset, timed out, moved).
	Held int `json:"held"`
	Lost int `json:"lost"`
	// New connections opened during the fault, and how many failed.
	NewConnections int `json:"new_connections"`
	NewErrors      int `json:"new_errors"`
	// ConvergeSeconds: from the end of the fault to the desired state.
	ConvergeSeconds float64 `json:"converge_seconds"`
	Note            string  `json:"note,omitempty"`
	// Run is which run of `make reliability` (RUNS of them, one after
	// another) measured it: $NETCUBE_RELIABILITY_RUN.
	Run int `json:"run,omitempty"`
}

// Long says whether the long versions of the fault tests are asked for.
func Long() bool { return os.Getenv("NETCUBE_RELIABILITY_LONG") == "1" }

// Write logs r and appends it to the report file, if one is named.
func Write(t testing.TB, r Record) {
	t.Helper()
	r.Run, _ = strconv.Atoi(os.Getenv("NETCUBE_RELIABILITY_RUN"))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fault record: %s", b)
	path := os.Getenv("NETCUBE_RELIABILITY_OUT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}
