// Package report tells the user about objects netcube cannot program as
// written: fields it had to leave out, a frontend two Services claim, an
// object defined twice or of a kind netcube does not read. Each problem is
// logged naming the object (and field, or the other object), counted in a
// gauge of the problems standing now, and, with the Kubernetes API, sent as
// a Warning Event on the object (Sink). A problem is reported once when it
// appears or changes and cleared when the object is fixed or gone, so a
// relist or a resync does not repeat it.
//
// It decides nothing: sources and the reconciler find the problems.
package report

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"
)

// Object names a Kubernetes object (or, for a manifest directory, a file:
// Kind "File").
type Object struct {
	Kind, Namespace, Name string
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Reason classifies a problem (the Event's reason, the gauge's label).
type Reason string

const (
	// InvalidField: a field netcube uses is invalid and was left out (or,
	// for access restrictions, made to deny everyone).
	InvalidField Reason = "InvalidField"
	// FrontendConflict: the Service claims a frontend (address, port,
	// protocol) another Service has; one of them is programmed.
	FrontendConflict Reason = "FrontendConflict"
	// DuplicateObject: a manifest directory defines the object twice.
	DuplicateObject Reason = "DuplicateObject"
	// UnreadObject: a manifest holds a kind or apiVersion netcube does not
	// read, or a document it cannot decode.
	UnreadObject Reason = "UnreadObject"
	// PodCIDRConflict: a Node's pod CIDR overlaps another node's; pods
	// in it are not routed to that node.
	PodCIDRConflict Reason = "PodCIDRConflict"
	// UnmatchedPort: a NetworkPolicy names a port no pod it applies to
	// has; that port allows nothing (until such a pod comes).
	UnmatchedPort Reason = "UnmatchedPort"
	// MapFull: a Service does not fit in a BPF map (too many frontends
	// or backends for its size); it is retried until there is room.
	MapFull Reason = "MapFull"
	// SliceConflict: a pod is selected by this NetworkSlice and another
	// of the same precedence; it is in the other.
	SliceConflict Reason = "SliceConflict"
	// LoadBalancerIPNotAssigned: a LoadBalancer Service got no address
	// from netcube (a pool exhausted, none selecting it, the address it
	// asks for taken or in no pool).
	LoadBalancerIPNotAssigned Reason = "LoadBalancerIPNotAssigned"
	// PoolConflict: a NetworkLoadBalancerPool overlaps an older one (or
	// cannot be read); it gives no address.
	PoolConflict Reason = "PoolConflict"
	// PodOutsideNode: a NodePods lists pods whose addresses are not in
	// its Node's pod CIDRs, or names no Node; those pods are not used
	// (their addresses match no pod selector).
	PodOutsideNode Reason = "PodOutsideNode"
	// IngressOutsidePools: a Service's status.loadBalancer.ingress holds
	// an address in no NetworkLoadBalancerPool while netcube assigns the
	// cluster's LoadBalancer IPs; that address is not served.
	IngressOutsidePools Reason = "IngressOutsidePools"
	// PolicyNotWritten: a pod's NetworkPolicy could not be written into
	// its node's maps (one full); the pod is quarantined until it is.
	PolicyNotWritten Reason = "PolicyNotWritten"
	// PeeringConflict: a NetworkBGPPeering selects a node another one
	// selects too with another local ASN; that node runs the other's
	// sessions (the first by name).
	PeeringConflict Reason = "PeeringConflict"
	// PeerLeftOut: a NetworkBGPPeering's peer cannot be configured on a
	// node (its password's Secret cannot be read, the node has no address
	// for a router id); the node runs the rest.
	PeerLeftOut Reason = "PeerLeftOut"
	// TierConflict: two ClusterNetworkPolicies of one tier and priority
	// select the same pods with rules of different actions; the API
	// leaves which applies first to the implementation.
	TierConflict Reason = "TierConflict"
)

// Reasons lists every reason (the gauge reports each, standing or not).
var Reasons = []Reason{InvalidField, FrontendConflict, DuplicateObject, UnreadObject, PodCIDRConflict, UnmatchedPort, MapFull, SliceConflict,
	LoadBalancerIPNotAssigned, PoolConflict, PodOutsideNode, IngressOutsidePools, PolicyNotWritten, PeeringConflict, PeerLeftOut, TierConflict}

// Sink receives each new or changed problem, e.g. to write a Kubernetes
// Event. It must not block.
type Sink interface {
	Warn(obj Object, reason Reason, message string)
}

// Problem is one standing problem.
type Problem struct {
	Object  Object
	Reason  Reason
	Message string
}

// Reporter holds the standing problems. A nil *Reporter reports nothing,
// so code can report unconditionally. Safe for concurrent use.
type Reporter struct {
	// Sink, if set, gets every new or changed problem.
	Sink Sink

	mu       sync.Mutex
	standing map[key]string
}

type key struct {
	obj    Object
	reason Reason
}

// New returns a reporter without a sink.
func New() *Reporter { return &Reporter{} }

// Set records obj's problem of kind reason (message "" clears it). A new
// or changed problem is logged and sent to the sink.
func (r *Reporter) Set(obj Object, reason Reason, message string) {
	if r == nil {
		return
	}
	k := key{obj, reason}
	r.mu.Lock()
	if r.standing == nil {
		r.standing = map[key]string{}
	}
	prev, had := r.standing[k]
	if message == "" {
		delete(r.standing, k)
	} else {
		r.standing[k] = message
	}
	sink := r.Sink
	r.mu.Unlock()
	switch {
	case message == "" && had:
		slog.Info("problem resolved", "object", obj.String(), "reason", string(reason))
	case message != "" && message != prev:
		slog.Warn("object not programmed as written", "object", obj.String(), "reason", string(reason), "problem", message)
		if sink != nil {
			sink.Warn(obj, reason, message)
		}
	}
}

// SetErr is Set with an error's text (nil clears).
func (r *Reporter) SetErr(obj Object, reason Reason, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.Set(obj, reason, msg)
}

// Clear forgets obj's problem of kind reason.
func (r *Reporter) Clear(obj Object, reason Reason) { r.Set(obj, reason, "") }

// Count returns the number of standing problems by reason.
func (r *Reporter) Count() map[Reason]int {
	out := map[Reason]int{}
	if r == nil {
		return out
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.standing {
		out[k.reason]++
	}
	return out
}

// Standing lists the standing problems, sorted.
func (r *Reporter) Standing() []Problem {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	out := make([]Problem, 0, len(r.standing))
	for k, m := range r.standing {
		out = append(out, Problem{k.obj, k.reason, m})
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		return fmt.Sprint(out[i].Object, out[i].Reason) < fmt.Sprint(out[j].Object, out[j].Reason)
	})
	return out
}
