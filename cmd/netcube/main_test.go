package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVerbs(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{args: []string{"version"}, code: 0, out: "netcube "},
		{args: []string{"help"}, code: 0, out: "netcube version"},
		{args: nil, code: 2, err: "Usage:"},
		{args: []string{"sandbox", "up"}, code: 2, err: `"sandbox" is a lab verb: run netcube-lab sandbox`},
		{args: []string{"bench"}, code: 2, err: "run netcube-lab bench"},
		{args: []string{"frobnicate"}, code: 2, err: `unknown command "frobnicate"`},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("netcube %v: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				tc.args, code, out.String(), errb.String(), tc.code, tc.out, tc.err)
		}
	}
}
