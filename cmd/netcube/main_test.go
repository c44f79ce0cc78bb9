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
		{args: []string{"help"}, code: 0, out: "netcube monitor"},
		{args: []string{"monitor", "--ip", "10.0.0.300"}, code: 2, err: `--ip "10.0.0.300" is not an IP address`},
		{args: []string{"monitor", "--port", "70000"}, code: 2, err: "--port 70000 is out of range"},
		{args: []string{"monitor", "--type", "drops"}, code: 2, err: `--type "drops": want drop or trace`},
		{args: []string{"monitor", "-o", "yaml"}, code: 2, err: `-o "yaml": want compact or json`},
		{args: []string{"monitor", "--socket", "/nonexistent/agent.sock"}, code: 1, err: "no agent answers: no socket at /nonexistent/agent.sock"},
		{args: []string{"help"}, code: 0, out: "netcube flows map"},
		{args: []string{"flows"}, code: 2, err: "Usage: netcube flows map"},
		{args: []string{"flows", "map", "--since", "5 minutes"}, code: 2, err: `invalid value "5 minutes" for flag -since`},
		{args: []string{"flows", "map", "--since", "-5m"}, code: 2, err: "--since -5m0s: want a positive duration"},
		{args: []string{"flows", "map", "-o", "png"}, code: 2, err: `-o "png": want svg, html or json`},
		{args: []string{"flows", "map", "--duration", "30s"}, code: 2, err: "--duration is for --follow"},
		{args: []string{"flows", "map", "--serve", "0.0.0.0:8080"}, code: 2, err: `--serve "0.0.0.0:8080": not a loopback address`},
		{args: []string{"flows", "map", "--tls-client-cert-file", "c.pem", "--server", "unix:///x"}, code: 2, err: "--tls-client-cert-file is given without --tls"},
		{args: []string{"flows", "map", "--server", "unix:///nonexistent/hubble.sock"}, code: 1, err: "--server unix:///nonexistent/hubble.sock: no socket at /nonexistent/hubble.sock"},
		{args: []string{"flows", "map", "--server", "127.0.0.1:1"}, code: 1, err: "--server 127.0.0.1:1: no Hubble server answers"},
		{args: []string{"flows", "map", "--server", "relay"}, code: 1, err: `--server "relay": want unix:///path or host:port`},
		{args: []string{"service"}, code: 2, err: "Usage: netcube service list"},
		{args: []string{"service", "list", "-o", "yaml"}, code: 2, err: `-o "yaml": want table or json`},
		{args: []string{"service", "list", "--bpf-root", "/nonexistent"}, code: 1, err: "no datapath pinned at /nonexistent"},
		{args: []string{"status", "-o", "yaml"}, code: 2, err: `-o "yaml": want text or json`},
		{args: []string{"trace", "10.244.1.1"}, code: 2, err: "Usage: netcube trace"},
		{args: []string{"policy"}, code: 2, err: "Usage: netcube policy get"},
		{args: []string{"policy", "get", "10.0.0.300"}, code: 2, err: `"10.0.0.300" is neither an IP address nor a pod`},
		{args: []string{"policy", "get", "--socket", "/nonexistent.sock", "default/x"}, code: 2, err: "pods are named by the agent"},
		{args: []string{"trace", "10.244.1.300", "10.96.0.10:80"}, code: 2, err: `source "10.244.1.300": "10.244.1.300" is not ADDR:PORT`},
		{args: []string{"trace", "10.244.1.1", "10.96.0.10:70000"}, code: 2, err: "port 70000 is out of range (1-65535)"},
		{args: []string{"trace", "10.244.1.1", "10.96.0.10"}, code: 2, err: "no port: give ADDR:PORT"},
		{args: []string{"trace", "10.244.1.1", "10.96.0.10:80/icmp"}, code: 2, err: `protocol "icmp" is not tcp or udp`},
		{args: []string{"trace", "10.244.1.1", "[fd00::1]:80"}, code: 2, err: "of different families"},
		{args: []string{"trace", "--socket", "/nonexistent.sock", "default/ghost", "10.96.0.10:80"}, code: 2, err: `source "default/ghost" is a pod name, and pods are named by the agent`},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("netcube %v: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
				tc.args, code, out.String(), errb.String(), tc.code, tc.out, tc.err)
		}
	}
}
