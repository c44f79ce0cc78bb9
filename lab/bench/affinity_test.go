package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPinProcess: every thread of a process is bound to the CPUs given,
// and freed to all of them again.
func TestPinProcess(t *testing.T) {
	if numCPU() < 2 {
		t.Skip("one CPU: nothing to bind apart")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	allowed := func() string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatal("no Cpus_allowed_list")
		return ""
	}
	all := allowed()
	if err := pinProcess(cmd.Process.Pid, 1); err != nil {
		t.Fatal(err)
	}
	if got := allowed(); got != "1" {
		t.Errorf("bound to CPU 1: allowed %q", got)
	}
	if err := pinProcess(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if got := allowed(); got != all {
		t.Errorf("freed: allowed %q, want %q as before", got, all)
	}
}
