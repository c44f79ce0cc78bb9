package images

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netcube/netcube/internal/testenv"
)

// TestImagesRunInContainerd: the agent image, built from this tree's
// static binaries, and the pause image are imported by a real containerd
// (Debian's, its own root, state and socket under the test's directory)
// under the names the chart and the runtime ask for, and run as containers
// (runc): the agent prints its flags; pause holds until SIGTERM, then
// exits.
func TestImagesRunInContainerd(t *testing.T) {
	testenv.RequireRoot(t)
	for _, b := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("%s not found: run hack/install-deps.sh", b)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "github.com/netcube/netcube/cmd/netcube-agent", "github.com/netcube/netcube/cmd/netcube-cni", "github.com/netcube/netcube/cmd/netcube-operator", "github.com/netcube/netcube/cmd/netcube")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	img, err := Build(Agent(bin))
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "agent.tar")
	if err := WriteArchive(archive, img, AgentRef); err != nil {
		t.Fatal(err)
	}
	pauseSpec, err := Pause(dir)
	if err != nil {
		t.Fatal(err)
	}
	pauseImg, err := Build(pauseSpec)
	if err != nil {
		t.Fatal(err)
	}
	pauseArchive := filepath.Join(dir, "pause.tar")
	if err := WriteArchive(pauseArchive, pauseImg, pauseSpec.Refs()...); err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(dir, "containerd.sock")
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// The opt plugin's directory in the test's too (its default is the
	// machine's /opt/containerd).
	config := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(config, []byte("version = 2\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = \""+filepath.Join(dir, "opt")+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cd := exec.Command("containerd", "--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"),
		"--address", sock, "--config", config)
	cd.Stdout, cd.Stderr = log, log
	if err := cd.Start(); err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("netcube-test-%d", os.Getpid())
	ctr := func(args ...string) (string, error) {
		out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", ns}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		for _, c := range []string{"agent", "pause"} {
			_, _ = ctr("task", "kill", "-s", "KILL", c)
			_, _ = ctr("task", "rm", c)
			_, _ = ctr("container", "rm", c)
		}
		_ = cd.Process.Kill()
		_ = cd.Wait()
		_ = exec.Command("umount", "-R", filepath.Join(dir, "root")).Run()
		_ = exec.Command("umount", "-R", filepath.Join(dir, "state")).Run()
		// The namespace's cgroups stay behind, empty, in each hierarchy.
		left, _ := filepath.Glob("/sys/fs/cgroup/*/" + ns)
		for _, cg := range left {
			if err := os.Remove(cg); err != nil {
				t.Errorf("cgroup left behind: %v", err)
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("containerd log:\n%s", b)
		}
	})
	testenv.WaitFor(t, 10*time.Second, "containerd serving", func() bool { _, err := ctr("version"); return err == nil })

	for _, a := range []string{archive, pauseArchive} {
		if out, err := ctr("images", "import", a); err != nil {
			t.Fatalf("import %s: %v\n%s", a, err, out)
		}
	}
	if out, err := ctr("images", "ls", "-q"); err != nil || !strings.Contains(out, AgentRef) || !strings.Contains(out, PauseRef) {
		t.Fatalf("images: %v\n%s", err, out)
	}
	out, _ := ctr("run", "--rm", AgentRef, "agent", "/usr/local/bin/netcube-agent", "--help")
	if !strings.Contains(out, "-bpf-root") || !strings.Contains(out, "-cni-conf-dir") {
		t.Fatalf("the agent in its container printed:\n%s", out)
	}

	if out, err := ctr("run", "-d", PauseRef, "pause"); err != nil {
		t.Fatalf("run pause: %v\n%s", err, out)
	}
	state := func() string {
		out, _ := ctr("task", "ls")
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "pause" {
				return f[2]
			}
		}
		return ""
	}
	testenv.WaitFor(t, 5*time.Second, "pause running", func() bool { return state() == "RUNNING" })
	time.Sleep(200 * time.Millisecond)
	if s := state(); s != "RUNNING" {
		t.Fatalf("pause did not stay up: %s", s)
	}
	if out, err := ctr("task", "kill", "-s", "TERM", "pause"); err != nil {
		t.Fatalf("kill pause: %v\n%s", err, out)
	}
	testenv.WaitFor(t, 5*time.Second, "pause exiting on SIGTERM", func() bool { return state() == "STOPPED" })
}
