package kube

import (
	"sync/atomic"
	"time"
)

// listPhases is where the initial lists' time goes, summed over every
// resource (they are listed at the same time, so the sums can exceed the
// wall time): waiting for the API server's pages (request, server work,
// reading the body), decoding them into API objects, and converting those
// to the model (and handing them on). The sync benchmark reports them
// beside the apply time, to show which phase a change helps.
type listPhases struct {
	ns [3]atomic.Int64 // by phase
}

// The phases of a list.
const (
	phaseList = iota
	phaseDecode
	phaseConvert
)

// ListPhases is how long the initial lists spent requesting, decoding and
// converting, as log fields; read it once the initial state is delivered.
func (s *Source) ListPhases() []any {
	secs := func(phase int) float64 { return time.Duration(s.phases.ns[phase].Load()).Seconds() }
	return []any{"list_seconds", secs(phaseList), "decode_seconds", secs(phaseDecode), "convert_seconds", secs(phaseConvert)}
}

// since adds the time since start to phase (p nil: not measured) and
// returns now, the next phase's start.
func (p *listPhases) since(phase int, start time.Time) time.Time {
	now := time.Now()
	if p != nil {
		p.ns[phase].Add(int64(now.Sub(start)))
	}
	return now
}
