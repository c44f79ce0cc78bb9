package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinProcess binds every thread of process pid (0: this one) to cpus (none:
// every CPU of the machine). Threads made later inherit their maker's
// binding.
func pinProcess(pid int, cpus ...int) error {
	var set unix.CPUSet
	if len(cpus) == 0 {
		for c := range numCPU() {
			set.Set(c)
		}
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if pid == 0 {
		pid = os.Getpid()
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return fmt.Errorf("threads of process %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("bind thread %d of process %d to CPUs %v: %w", tid, pid, cpus, err)
		}
	}
	return nil
}

// numCPU counts the machine's CPUs (/sys/devices/system/cpu/cpuN), not
// this process's binding.
func numCPU() int {
	m, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*")
	return max(1, len(m))
}
