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

// TestAgentImageRunsInContainerd: the agent image, built from this tree's
// static binaries, is imported by a real containerd (Debian's, its own
// root, state and socket under the test's directory) under the name the
// chart asks for, and runs as a container (runc): the agent prints its
// flags.
func TestAgentImageRunsInContainerd(t *testing.T) {
	testenv.RequireRoot(t)
	for _, b := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("%s not found: run hack/install-deps.sh", b)
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "github.com/netcube/netcube/cmd/netcube-agent", "github.com/netcube/netcube/cmd/netcube-cni")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	img, err := Build(Agent(bin))
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "agent.tar")
	if err := WriteArchive(archive, AgentRef, img); err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(dir, "containerd.sock")
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cd := exec.Command("containerd", "--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"),
		"--address", sock, "--config", "/dev/null")
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
		_, _ = ctr("task", "kill", "-s", "KILL", "agent")
		_, _ = ctr("container", "rm", "agent")
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

	if out, err := ctr("images", "import", archive); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	if out, err := ctr("images", "ls", "-q"); err != nil || !strings.Contains(out, AgentRef) {
		t.Fatalf("images: %v\n%s", err, out)
	}
	out, _ := ctr("run", "--rm", AgentRef, "agent", "/usr/local/bin/netcube-agent", "--help")
	if !strings.Contains(out, "-bpf-root") || !strings.Contains(out, "-cni-conf-dir") {
		t.Fatalf("the agent in its container printed:\n%s", out)
	}
}
