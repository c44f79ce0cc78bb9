// Package controlplane runs netcube-agent against a real kube-apiserver and
// etcd (built from the Go module proxy by hack/build-tools.sh) and checks
// that what is written through the API reaches the agent's pinned maps.
package controlplane

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/cubes/lb"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
)

var (
	env    *kubeenv.Env
	binDir string
)

func TestMain(m *testing.M) {
	if why, skip := testenv.RootMissing(); skip {
		fmt.Println("skipping control-plane tests: they need root (BPF); " + testenv.SkipRootEnv + "=1")
		os.Exit(0)
	} else if why != "" {
		fmt.Fprintln(os.Stderr, "FAIL: control-plane tests: "+why)
		os.Exit(1)
	}
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "netcube-cp-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binDir = filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", binDir+"/", "github.com/netcube/netcube/cmd/...").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build: %v\n%s", err, out)
	}
	env, err = kubeenv.Start(kubeenv.Options{Dir: filepath.Join(dir, "kube")})
	if err != nil {
		return 0, err
	}
	defer env.Stop()
	return m.Run(), nil
}

// agent is a netcube-agent process against the test API server, with its
// own pins (no socket-LB, no pod interfaces: only the maps are looked at).
type agent struct {
	pins, metrics, healthz string
	cmd                    *exec.Cmd
	log                    string
}

func startAgent(t *testing.T, pins string, extra ...string) *agent {
	t.Helper()
	testenv.EnsureBPFFS(t)
	a := &agent{pins: pins, metrics: freeAddr(t), healthz: freeAddr(t), log: filepath.Join(t.TempDir(), "agent.log")}
	logf, err := os.Create(a.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := append([]string{"--kubeconfig", env.Kubeconfig, "--node-name", "node1", "--bpf-root", pins,
		"--socket-lb=false", "--pod-iface-prefix", "none-", "--node-ifaces", "none", "--cni-socket=", "--api-socket=", "--hubble-socket=", "--metrics-bind-address", a.metrics,
		"--healthz-bind-address", a.healthz}, extra...)
	a.cmd = exec.Command(filepath.Join(binDir, "netcube-agent"), args...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			b, _ := os.ReadFile(a.log)
			t.Logf("agent log:\n%s", b)
		}
	})
	testenv.WaitFor(t, 30*time.Second, "agent ready", func() bool { return a.get("/readyz", a.healthz) == "ok" })
	return a
}

func (a *agent) stop() {
	if a.cmd.ProcessState == nil {
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		_ = a.cmd.Wait()
	}
}

func (a *agent) get(path, addr string) string {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// programmed reads what the agent wrote to its pinned maps.
func programmed(t *testing.T, pins string) map[model.Frontend][]model.Backend {
	t.Helper()
	maps, closeMaps, err := datapath.OpenPinned(pins)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMaps()
	fes, err := lb.Dump(maps)
	if err != nil {
		t.Fatal(err)
	}
	return fes
}

func pinDir(t *testing.T) string {
	dir := filepath.Join(datapath.BPFFS, testenv.Name("netcube-test-cp-")+"-"+strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(func() { _ = datapath.Unpin(dir) })
	return dir
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// status returns an endpoint's status code and body, whatever the code.
func (a *agent) status(path, addr string) (int, string) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// alive says whether the agent process still runs.
func (a *agent) alive() bool { return a.cmd.Process.Signal(syscall.Signal(0)) == nil }
