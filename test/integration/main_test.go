// Package integration runs netcube in the sandbox: real agents programming
// the real datapath, real TCP and UDP between pod network namespaces.
package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// up starts a sandbox private to this test and removes it afterwards, even
// if the test fails.
func up(t *testing.T, socketLB bool) *sandbox.Sandbox {
	t.Helper()
	prefix := "t"
	if socketLB {
		prefix = "ts"
	}
	return upWith(t, prefix, sandbox.Config{SocketLB: socketLB})
}

// upWith is up with any sandbox configuration; its name starts with prefix.
func upWith(t *testing.T, prefix string, cfg sandbox.Config) *sandbox.Sandbox {
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
		assertGone(t, sb.Topology)
	})
	return sb
}

// assertGone checks that nothing of a sandbox is left: namespaces (and so
// their links), pins, cgroups, state.
func assertGone(t *testing.T, top sandbox.Topology) {
	t.Helper()
	left, _ := filepath.Glob("/run/netns/" + top.Name + "-*")
	v1, _ := filepath.Glob("/sys/fs/cgroup/*/netcube-" + top.Name + "-*") // real nodes' kubelet cgroups
	left = append(left, v1...)
	for _, p := range []string{top.PinRoot, top.CgroupRoot, top.StateDir, "/var/lib/netcube-sandbox/" + top.Name} {
		if _, err := os.Stat(p); err == nil {
			left = append(left, p)
		}
	}
	if len(left) > 0 {
		t.Errorf("sandbox %s left behind: %v", top.Name, left)
	}
}

// requests sends count requests from the client pod and returns the results.
func requests(t *testing.T, sb *sandbox.Sandbox, proto, addr string, count int, extra ...string) []traffic.Result {
	t.Helper()
	return requestsFrom(t, sb, sb.Topology.ClientPod().Name, proto, addr, count, extra...)
}

// requestsFrom sends count requests from who: a pod, a node (its own
// processes) or the external client.
func requestsFrom(t *testing.T, sb *sandbox.Sandbox, who, proto, addr string, count int, extra ...string) []traffic.Result {
	t.Helper()
	args := append([]string{"pod", "request", "--proto", proto, "--count", fmt.Sprint(count)}, extra...)
	out, err := sb.Output(who, filepath.Join(binDir, sandbox.LabBinary), append(args, addr)...)
	if err != nil {
		t.Fatal(err)
	}
	return parseResults(t, out)
}

// parseResults reads the JSON lines of `netcube-lab pod request`.
func parseResults(t *testing.T, out []byte) []traffic.Result {
	t.Helper()
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

// stream is a client running in the client pod, one request at a time until
// stopped; each result is kept with the time it arrived.
type stream struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	results []timed
	done    chan struct{}
}

type timed struct {
	at time.Time
	traffic.Result
}

func startStream(t *testing.T, sb *sandbox.Sandbox, proto, addr string, extra ...string) *stream {
	t.Helper()
	args := append([]string{"pod", "request", "--proto", proto, "--count", "0", "--interval", "10ms"}, extra...)
	cmd := exec.Command(filepath.Join(binDir, sandbox.LabBinary), append(args, addr)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{cmd: cmd, done: make(chan struct{})}
	if err := sb.Start(sb.Topology.ClientPod().Name, cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var r traffic.Result
			if json.Unmarshal(sc.Bytes(), &r) == nil {
				s.mu.Lock()
				s.results = append(s.results, timed{time.Now(), r})
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *stream) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
		_ = s.cmd.Wait()
	}
}

// since returns the results that arrived after t0.
func (s *stream) since(t0 time.Time) []timed {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []timed
	for _, r := range s.results {
		if r.at.After(t0) {
			out = append(out, r)
		}
	}
	return out
}
