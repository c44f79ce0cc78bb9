package kubeenv

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// A process that connects to a control plane finds its processes by the
// pid files their starter wrote, and never a pid now used by another
// program.
func TestPidFromFile(t *testing.T) {
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	self := strings.TrimSpace(string(comm))
	e := &Env{Options: Options{Dir: t.TempDir()}}
	pid := strconv.Itoa(os.Getpid())
	if err := os.WriteFile(e.pidFile(self), []byte(pid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := e.pidFromFile(self); got != os.Getpid() {
		t.Fatalf("pid file of %s naming this process: %d, want %d", self, got, os.Getpid())
	}
	if err := os.WriteFile(e.pidFile("etcd"), []byte(pid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := e.pidFromFile("etcd"); got != 0 {
		t.Errorf("etcd's pid file naming this process (%s): %d, want 0", self, got)
	}
	if got := (&Env{Options: Options{Dir: t.TempDir()}}).APIServerPID(); got != 0 {
		t.Errorf("no pid file: kube-apiserver pid %d, want 0", got)
	}
}
