package bench

// Letting the control plane settle before a full sync is timed: the
// benchmark writes hundreds of thousands of objects into etcd directly,
// and the API server takes each into its watch cache after the write
// returns. A data plane started meanwhile would be timed against an API
// server still busy with the benchmark's own load, which no node of a
// settled cluster meets.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// controlPlane is the sandbox's kube-apiserver and etcd, found by the
// directory their command lines name.
type controlPlane struct{ pids []int }

// findControlPlane finds the kube-apiserver and etcd processes whose
// arguments name dir (the sandbox's kube directory).
func findControlPlane(dir string) (controlPlane, error) {
	var cp controlPlane
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		name := filepath.Base(string(args[0]))
		if (name != "kube-apiserver" && name != "etcd") || !bytes.Contains(b, []byte(dir+"/")) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			cp.pids = append(cp.pids, pid)
		}
	}
	if len(cp.pids) != 2 {
		return cp, fmt.Errorf("found %d processes of kube-apiserver and etcd naming %s, want 2", len(cp.pids), dir)
	}
	return cp, nil
}

// cpu is the control plane's CPU seconds so far.
func (cp controlPlane) cpu() float64 {
	total := 0.0
	for _, pid := range cp.pids {
		c, _ := procUsage(pid)
		total += c
	}
	return total
}

// Settled: the control plane used less than settleCPU CPU-seconds in
// the last settleWindow (the API server's own housekeeping stays under it).
const (
	settleCPU    = 0.05
	settleWindow = time.Second
	settleMax    = 10 * time.Minute
)

// settle waits until the control plane is idle, reporting to log how long
// that took; past settleMax it says so and goes on.
func (cp controlPlane) settle(log io.Writer) {
	start := time.Now()
	last := cp.cpu()
	for time.Since(start) < settleMax {
		time.Sleep(settleWindow)
		now := cp.cpu()
		if now-last < settleCPU {
			if d := time.Since(start); d > 2*settleWindow {
				fmt.Fprintf(log, "     API server and etcd settled after %.0f s\n", d.Seconds())
			}
			return
		}
		last = now
	}
	fmt.Fprintf(log, "     API server and etcd still busy after %s: going on\n", settleMax)
}
