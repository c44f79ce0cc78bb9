// Package adversarial attacks netcube as a hostile pod, a hostile host
// outside the cluster and a compromised node would, in the sandbox: real
// agents, real packets between real network namespaces. Each attack is
// preceded by a positive control on the same path (the well-behaved
// packet arrives), and its failure is shown where it would have landed: a
// capture in the target's namespace (netcube-lab pod capture), not only a
// counter of the datapath. docs/security.md lists the promises these tests
// hold.
package adversarial

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/sandbox"
	"github.com/netcube/netcube/lab/traffic"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "netcube-bin-")
	if err != nil {
		panic(err)
	}
	out, err := exec.Command("go", "build", "-o", dir+"/", "github.com/netcube/netcube/cmd/...", "github.com/netcube/netcube/lab/cmd/...").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	binDir = dir
	for _, name := range testenv.StaleSandboxes() {
		fmt.Fprintf(os.Stderr, "removing sandbox %s left by a killed test run\n", name)
		_ = sandbox.Down(name, io.Discard)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// up starts a sandbox private to the test (its name starts with prefix)
// and removes it afterwards, even if the test fails, checking that
// nothing of it is left.
func up(t *testing.T, prefix string, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	testenv.RequireRoot(t)
	name := testenv.Name(prefix)
	cfg.Name = name
	if cfg.BinDir == "" {
		cfg.BinDir = binDir
	}
	_ = sandbox.Down(name, io.Discard)
	var log strings.Builder
	sb, err := sandbox.Up(cfg, &log)
	if err != nil {
		t.Fatalf("sandbox up: %v\n%s", err, log.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range sb.Topology.Nodes {
				b, _ := os.ReadFile(filepath.Join(sb.Topology.LogDir(), "agent-"+n.Name+".log"))
				t.Logf("agent %s log:\n%s", n.Name, b)
			}
		}
		if err := sandbox.Down(name, io.Discard); err != nil {
			t.Errorf("sandbox down: %v", err)
		}
		top := sb.Topology
		left, _ := filepath.Glob("/run/netns/" + top.Name + "-*")
		for _, p := range []string{top.PinRoot, top.CgroupRoot, top.StateDir} {
			if _, err := os.Stat(p); err == nil {
				left = append(left, p)
			}
		}
		if len(left) > 0 {
			t.Errorf("sandbox %s left behind: %v", top.Name, left)
		}
	})
	return sb
}

// lab runs netcube-lab in who (a pod, a node, or the external host) and
// returns its standard output.
func lab(t *testing.T, sb *sandbox.Sandbox, who string, args ...string) []byte {
	t.Helper()
	out, err := sb.Output(who, filepath.Join(binDir, sandbox.LabBinary), args...)
	if err != nil {
		t.Fatalf("netcube-lab %s in %s: %v\n%s", strings.Join(args, " "), who, err, out)
	}
	return out
}

// send sends crafted frames from who: their IP packets through its
// routes (a raw socket), or, with dev, the frames as they are out of that
// device (a packet socket).
func send(t *testing.T, sb *sandbox.Sandbox, who, dev string, frames ...[]byte) {
	t.Helper()
	args := []string{"pod", "send"}
	if dev != "" {
		args = append(args, "--dev", dev)
	}
	for _, f := range frames {
		args = append(args, hex.EncodeToString(f))
	}
	lab(t, sb, who, args...)
}

// request sends count requests from who to addr and returns the results.
func request(t *testing.T, sb *sandbox.Sandbox, who, proto, addr string, count int, extra ...string) []traffic.Result {
	t.Helper()
	args := append([]string{"pod", "request", "--proto", proto, "--count", fmt.Sprint(count)}, extra...)
	out := lab(t, sb, who, append(args, addr)...)
	var rs []traffic.Result
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r traffic.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("bad output line %q: %v", line, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// capture counts the frames holding marker that reach dev in who while
// during runs (started once the capture is listening), and for a moment
// after it.
func capture(t *testing.T, sb *sandbox.Sandbox, who, dev, marker string, during func()) traffic.Caught {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, sandbox.LabBinary), "pod", "capture", "--dev", dev, "--marker", marker, "--for", "3s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := sb.Start(who, cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.Contains(sc.Text(), "listening") {
		t.Fatalf("capture in %s did not start: %s", who, stderr.String())
	}
	start := time.Now()
	during()
	var got traffic.Caught
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &got) != nil {
		t.Fatalf("capture in %s: no result (%s)", who, stderr.String())
	}
	if time.Since(start) < 500*time.Millisecond {
		t.Fatalf("capture in %s ended before the packets had time to arrive", who)
	}
	return got
}
