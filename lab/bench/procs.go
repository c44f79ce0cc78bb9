package bench

import (
	"os"
	"time"
)

// closed reports, without blocking, whether ch is closed: whether a
// process the benchmark started has exited (each closes its channel once
// reaped).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stopProcess sends p sig and waits for done (closed once p is reaped);
// after grace it kills p and waits again.
func stopProcess(p *os.Process, done <-chan struct{}, sig os.Signal, grace time.Duration) {
	_ = p.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = p.Kill()
		<-done
	}
}
