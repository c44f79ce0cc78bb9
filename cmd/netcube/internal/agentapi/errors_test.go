package agentapi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/netcube/netcube/pkg/datapath"
)

// TestErrorsSayWhatIsWrong: each way a verb cannot reach its node gets
// its own message, naming the path and what to try; none blames another
// version unless the pins' layout says so.
func TestErrorsSayWhatIsWrong(t *testing.T) {
	sandboxRoot := t.TempDir() // like /sys/fs/bpf/netcube: a sandbox's pins below it
	node1 := filepath.Join(sandboxRoot, "nc", "node1")
	if err := os.MkdirAll(node1, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(node1, pinMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	layout := &datapath.PinLayoutError{Map: "router_sources", Key: 16, Value: 8, WantKey: 16, WantValue: 4}
	for _, c := range []struct {
		name    string
		err     error
		want    []string
		notWant string
	}{
		{"no pins at the root, a sandbox's below it", pinError(sandboxRoot, fmt.Errorf("open pinned map ct_flows: %w", fs.ErrNotExist)),
			[]string{"no datapath pinned at " + sandboxRoot + " itself, but below it: " + node1, "--bpf-root", "NETCUBE_BPF_ROOT"}, "another version"},
		{"no pins anywhere", pinError(empty, fmt.Errorf("open pinned map ct_flows: %w", fs.ErrNotExist)),
			[]string{"no datapath pinned at " + empty, "is the netcube agent running on this node", "netcube-lab sandbox env NODE"}, "another version"},
		{"no root", pinError("/nonexistent/bpf", &fs.PathError{Op: "stat", Path: "/nonexistent/bpf", Err: syscall.ENOENT}),
			[]string{"no datapath pinned at /nonexistent/bpf", "is the netcube agent running"}, "another version"},
		{"permission denied", pinError("/sys/fs/bpf/netcube", fmt.Errorf("open pinned map ct_flows: %w", fs.ErrPermission)),
			[]string{"permission denied reading the datapath pinned at /sys/fs/bpf/netcube", "run as root"}, "another version"},
		{"another layout", pinError("/sys/fs/bpf/netcube", layout),
			[]string{"of another version of netcube than this CLI", "router_sources has 16-byte keys and 8-byte values, this build's 16 and 4"}, ""},
		{"no socket", socketError("/run/netcube/agent.sock", &os.SyscallError{Syscall: "connect", Err: syscall.ENOENT}),
			[]string{"no socket at /run/netcube/agent.sock", "--api-socket", "NETCUBE_SOCKET", "netcube-lab sandbox env NODE"}, ""},
		{"a socket nobody listens on", socketError("/run/netcube/agent.sock", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}),
			[]string{"nothing listens on /run/netcube/agent.sock", "has stopped"}, ""},
		{"a socket not ours to open", socketError("/run/netcube/agent.sock", &os.SyscallError{Syscall: "connect", Err: syscall.EACCES}),
			[]string{"permission denied on /run/netcube/agent.sock", "run as root"}, ""},
	} {
		msg := c.err.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q lacks %q", c.name, msg, w)
			}
		}
		if c.notWant != "" && strings.Contains(msg, c.notWant) {
			t.Errorf("%s: %q says %q", c.name, msg, c.notWant)
		}
		if strings.HasPrefix(c.name, "no socket") || strings.HasPrefix(c.name, "a socket") {
			if !errors.Is(c.err, ErrNoAgent) {
				t.Errorf("%s: not ErrNoAgent", c.name)
			}
		}
	}
}

// TestEnvironmentSetsTheDefaults: $NETCUBE_SOCKET and $NETCUBE_BPF_ROOT
// are the flags' defaults (what `netcube-lab sandbox env` exports), the
// built-in paths without them.
func TestEnvironmentSetsTheDefaults(t *testing.T) {
	t.Setenv(EnvSocket, "")
	t.Setenv(EnvBPFRoot, "")
	if SocketDefault() != DefaultSocket || BPFRootDefault() != DefaultBPFRoot {
		t.Fatalf("without the environment: %s, %s", SocketDefault(), BPFRootDefault())
	}
	t.Setenv(EnvSocket, "/run/netcube/nc/node1/agent.sock")
	t.Setenv(EnvBPFRoot, "/sys/fs/bpf/netcube/nc/node1")
	if SocketDefault() != "/run/netcube/nc/node1/agent.sock" || BPFRootDefault() != "/sys/fs/bpf/netcube/nc/node1" {
		t.Errorf("with the environment: %s, %s", SocketDefault(), BPFRootDefault())
	}
}
