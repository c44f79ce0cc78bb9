package model

import "k8s.io/apimachinery/pkg/labels"

// SliceClass is a network slice's class: what its traffic needs.
type SliceClass uint8

const (
	// BestEffort: no promise (the default of every pod).
	BestEffort SliceClass = iota
	// Latency: URLLC-like; low, steady latency: served first.
	Latency
	// Throughput: eMBB-like; bulk.
	Throughput
)

func (c SliceClass) String() string {
	switch c {
	case Latency:
		return "latency"
	case Throughput:
		return "throughput"
	}
	return "best-effort"
}

// Slice is a NetworkSlice: the pods it selects, what their packets leave
// the node with, and an optional egress rate.
type Slice struct {
	Name  string
	Class SliceClass
	// DSCP is what its packets leave with, 0..63 (the class's default
	// when the object names none).
	DSCP uint8
	// Rate is the slice's egress rate on each node, in bits per second
	// (0: none); Burst, in bytes, what may leave at once after idling.
	Rate, Burst uint64
	// Precedence decides for a pod two slices select: the higher wins.
	Precedence int32
	// Namespaces and Pods select its pods (nil: every namespace, every
	// pod of them).
	Namespaces, Pods labels.Selector
}
