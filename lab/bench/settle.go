package bench

// Letting the control plane settle before a full sync is timed: the
// benchmark writes hundreds of thousands of objects into etcd directly,
// and the API server takes each into its watch cache after the write
// returns. A data plane started meanwhile would be timed against an API
// server still busy with the benchmark's own load, which no node of a
// settled cluster meets.

import (
	"fmt"
	"io"
	"time"

	"github.com/netcube/netcube/lab/kubeenv"
)

// controlPlane is the sandbox's kube-apiserver and etcd.
type controlPlane struct{ pids []int }

// controlPlaneOf is env's kube-apiserver and etcd (the pids its starter
// recorded).
func controlPlaneOf(env *kubeenv.Env) (controlPlane, error) {
	api, etcd := env.APIServerPID(), env.EtcdPID()
	if api == 0 || etcd == 0 {
		return controlPlane{}, fmt.Errorf("the control plane under %s: kube-apiserver pid %d, etcd pid %d (want both running)", env.Dir, api, etcd)
	}
	return controlPlane{pids: []int{api, etcd}}, nil
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
