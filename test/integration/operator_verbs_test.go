package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/lab/sandbox"
)

// TestOperatorVerbsRunAsPrinted: the operator's first commands, as the
// demo and `netcube-lab sandbox status` print them for a sandbox node,
// run as printed from a checkout (bin/ built, bin/hubble from make tools)
// and answer about that node: its datapath, its Services, a trace, a
// pod's policy, its events, its flows through the real hubble CLI. Then
// the case they fix: netcube's verbs with the built-in paths find no
// datapath at /sys/fs/bpf/netcube itself, and say where the sandbox's
// pins are instead of blaming another version.
func TestOperatorVerbsRunAsPrinted(t *testing.T) {
	sb := upWith(t, "ov", sandbox.Config{SocketLB: true})
	top := sb.Topology
	node := top.Nodes[0]
	client := top.ClientPod()
	// A checkout as the demo leaves it: bin/ with netcube, netcube-lab
	// and hubble.
	checkout := t.TempDir()
	if err := os.Mkdir(filepath.Join(checkout, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"netcube": filepath.Join(binDir, "netcube"), sandbox.LabBinary: filepath.Join(binDir, sandbox.LabBinary), "hubble": hubbleCLI(t)} {
		if err := os.Symlink(target, filepath.Join(checkout, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(line string, timeout time.Duration) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir = checkout
		cmd.Env = append(os.Environ(), "NETCUBE_SOCKET=", "NETCUBE_BPF_ROOT=", "HUBBLE_SERVER=") // the shell of a new user
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Traffic first: flows for trace, hubble and the Service list.
	if out, err := run("bin/netcube-lab sandbox exec --name "+top.Name+" "+client.Name+" -- bin/netcube-lab pod request --count 5 "+sandbox.EchoIPs[0]+":80", time.Minute); err != nil {
		t.Fatalf("requests to echo: %v\n%s", err, out)
	}

	want := map[string][]string{
		"bin/netcube status":       {node.Name},
		"bin/netcube service list": {sandbox.EchoIPs[0]},
		"bin/netcube trace":        {sandbox.EchoIPs[0]},
		"bin/netcube policy get":   {client.IP4.String() + ":", "no NetworkPolicy selects it"},
		"bin/netcube monitor":      {sandbox.EmptyIPs[0]},
		"bin/hubble observe":       {"default/" + client.Name},
	}
	cmds := top.OperatorCommands(top.Name, node)
	if len(cmds) != len(want) {
		t.Fatalf("%d commands printed, want %d: %+v", len(cmds), len(want), cmds)
	}
	// The README and the getting-started page give the same commands for
	// the demo's sandbox (named nc), so what they print is what runs here.
	for _, page := range []string{"README.md", "docs/getting-started.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			if line := strings.ReplaceAll(c.Line, "--name "+top.Name+" ", "--name nc "); !strings.Contains(string(b), line) {
				t.Errorf("%s lacks the printed command %q", page, line)
			}
		}
	}
	for _, c := range cmds {
		var markers []string
		for prefix, m := range want {
			if strings.Contains(c.Line, "-- "+prefix) {
				markers = m
			}
		}
		if markers == nil {
			t.Errorf("printed command %q: no check for it", c.Line)
			continue
		}
		stop := func() {}
		if c.Needs != "" {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				for ctx.Err() == nil {
					_, _ = run(c.Needs, 30*time.Second)
					time.Sleep(200 * time.Millisecond)
				}
			}()
			stop = cancel
		}
		out, err := run(c.Line, time.Minute)
		stop()
		if err != nil {
			t.Errorf("%s: %v\n%s", c.Line, err, out)
			continue
		}
		for _, m := range markers {
			if !strings.Contains(out, m) {
				t.Errorf("%s: output lacks %q:\n%s", c.Line, m, out)
			}
		}
	}
	// Every other command the pages give for the demo, in page order,
	// with requests running beside them: to the Service without endpoints
	// (drops on node1) and to a pod on node2 (drops there once a page's
	// policy isolates it).
	ctx, cancel := context.WithCancel(context.Background())
	target := top.Nodes[1].Pods[0] // n2p1
	go func() {
		for ctx.Err() == nil {
			_, _ = run(fmt.Sprintf("bin/netcube-lab sandbox exec --name %s %s -- bin/netcube-lab pod request --count 2 --timeout 300ms %s:80 && "+
				"bin/netcube-lab sandbox exec --name %s %s -- bin/netcube-lab pod request --count 2 --timeout 300ms %s:8080",
				top.Name, client.Name, sandbox.EmptyIPs[0], top.Name, client.Name, target.IP4), 30*time.Second)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	if err := os.Symlink(filepath.Join(wd(t), "..", "..", "docs"), filepath.Join(checkout, "docs")); err != nil {
		t.Fatal(err)
	}
	docs := docsCommands(t, docsPages(t))
	for _, c := range docs {
		script := forSandbox(c.script, top.Name, top.StateDir)
		out, err := run("set -e\n"+script, time.Minute)
		if err != nil {
			t.Errorf("%s: the command\n%s\nfailed: %v\n%s", c.page, c.script, err, out)
			continue
		}
		if strings.Contains(script, "bin/netcube ") || strings.Contains(script, "bin/hubble ") {
			if strings.TrimSpace(out) == "" {
				t.Errorf("%s: the command\n%s\nprinted nothing", c.page, c.script)
			}
		}
		for cmd, markers := range docsMarkers {
			if !strings.Contains(c.script, cmd) {
				continue
			}
			for _, m := range markers {
				if !strings.Contains(out, m) {
					t.Errorf("%s: the commands\n%s\nprinted no %q:\n%s", c.page, c.script, m, out)
				}
			}
		}
	}
	cancel()
	t.Logf("ran %d commands from the pages", len(docs))

	// After the positive controls above on the same pins: without the
	// environment, the built-in paths find no datapath and say where it is.
	var out string
	var err error
	out, err = run("bin/netcube status", 30*time.Second)
	if err == nil || !strings.Contains(out, "no datapath pinned at /sys/fs/bpf/netcube itself, but below it") || !strings.Contains(out, node.PinDir) ||
		strings.Contains(out, "another version") {
		t.Errorf("bin/netcube status with the built-in paths: %v\n%s\nwant it to fail naming %s, never another version", err, out, node.PinDir)
	}

}

// docsMarkers: what a page's block must print when it holds the command
// (the key): the ClusterNetworkPolicy page's verbs name the policy and
// its tier, in evaluation order, in the entries, in the trace and in the
// drops.
var docsMarkers = map[string][]string{
	"node1 -- bin/netcube trace 10.244.1.1 10.244.2.1:8080/tcp": {
		"Admin no-client-to-echo-8080 (priority 10) rule 0 echo-8080: Deny", // policy get, evaluation order
		"deny  egress", // policy get, the entries
		"denied by ClusterNetworkPolicy:Admin:no-client-to-echo-8080", // trace and monitor
	},
}

func wd(t *testing.T) string {
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
