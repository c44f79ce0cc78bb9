// Package qos is the QoS cube: network slices in the datapath. It owns the
// maps of bpf/cubes/qos (which slice each pod of this node is in, what a
// slice's packets leave with, the rates' buckets), decides which slice a
// pod is in (selectors and precedence), writes the maps incrementally, and
// sets up the uplinks' queueing (a strict-priority prio qdisc with fq
// under each band, for the latency class and Earliest Departure Time).
// It does not parse Kubernetes objects (pkg/k8s does).
package qos
