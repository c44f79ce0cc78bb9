package sandbox

import (
	"errors"
	"fmt"
	"github.com/netcube/netcube/lab/internal/logs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// spawn starts a long-running process in a network namespace (and cgroup,
// if given), logging to <logs>/<name>.log and recording its pid.
func spawn(t Topology, name, netns, cgroup string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(t.LogDir(), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + netns, "--"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cgroup != "" {
		dir, err := os.Open(cgroup)
		if err != nil {
			return err
		}
		defer dir.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while we are alive
	return os.WriteFile(pidFile(t, name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

func pidFile(t Topology, name string) string { return filepath.Join(t.StateDir, "pids", name+".pid") }

// pidOf returns the recorded pid of a process, if it is still alive.
func pidOf(t Topology, name string) (int, bool) {
	b, err := os.ReadFile(pidFile(t, name))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, syscall.Kill(pid, 0) == nil && !zombie(pid)
}

// ProcessAlive says whether pid runs (exists and is not a zombie).
func ProcessAlive(pid int) bool { return syscall.Kill(pid, 0) == nil && !zombie(pid) }

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "pid (comm) S ...": the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// stop sends sig to a recorded process and waits up to timeout for it to go.
func stop(t Topology, name string, sig syscall.Signal, timeout time.Duration) error {
	pid, alive := pidOf(t, name)
	if !alive {
		return nil
	}
	_ = syscall.Kill(pid, sig)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, alive := pidOf(t, name); !alive {
			return nil
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return errors.New(name + " did not stop in time; killed")
}

// waitFile waits for path to exist, failing early if process name died.
func waitFile(t Topology, path, name string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if _, alive := pidOf(t, name); !alive {
			return fmt.Errorf("%s exited; last lines of %s:\n%s", name,
				filepath.Join(t.LogDir(), name+".log"), logs.Tail(filepath.Join(t.LogDir(), name+".log"), 15))
		}
	}
	return fmt.Errorf("%s not ready after %s; see %s", name, timeout, filepath.Join(t.LogDir(), name+".log"))
}
