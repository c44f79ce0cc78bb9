package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netcube/netcube/internal/testenv"
)

// TestNodeExecStartsPluginInNodeNetns: the lab's runtime forks a CNI
// plugin from a thread switched into the node's network namespace (no
// nsenter). The plugin here is a script that prints the namespace it runs
// in: the node's, not the lab's; and the lab's own threads stay in its.
func TestNodeExecStartsPluginInNodeNetns(t *testing.T) {
	testenv.RequireRoot(t)
	name := testenv.Name("ncexec")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	nodeNS := nsOf(t, "/run/netns/"+name)
	ownNS := nsOf(t, "/proc/self/ns/net")
	if nodeNS == ownNS {
		t.Fatalf("the test's namespace %s is the node's: nothing to tell apart", ownNS)
	}
	plugin := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\nstat -L -c %i /proc/self/ns/net\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Positive control: run where the lab runs, the script reports the
	// lab's namespace.
	here, err := exec.Command(plugin).Output()
	if err != nil || strings.TrimSpace(string(here)) != ownNS {
		t.Fatalf("the script run directly reports %q (%v), want the lab's namespace %s", here, err, ownNS)
	}
	for range 3 { // the thread is switched back: every run starts from the lab's namespace
		out, err := nodeExec{netns: name}.ExecPlugin(context.Background(), plugin, nil, os.Environ())
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != nodeNS {
			t.Fatalf("the plugin ran in namespace %s, want the node's %s (the lab's is %s)", got, nodeNS, ownNS)
		}
	}
	if got := nsOf(t, "/proc/thread-self/ns/net"); got != ownNS {
		t.Fatalf("this thread is in namespace %s after the runs, want the lab's %s", got, ownNS)
	}
}

// nsOf is the inode of the network namespace a path names.
func nsOf(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("stat", "-L", "-c", "%i", path).Output()
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}
