package bench

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
