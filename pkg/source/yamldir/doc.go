// Package yamldir is a Source reading Services, EndpointSlices and Nodes
// (their pod CIDRs), and, for a handler enforcing NetworkPolicy (a
// source.PolicyHandler), Pods, Namespaces and NetworkPolicies, from a
// directory of Kubernetes YAML (or JSON) files, watching it for changes.
//
// Each file may hold several documents. Every change is delivered per
// object: editing one Service in one file emits exactly that Service. A file
// that does not parse, or an object that is invalid, is reported with the
// file and object named; the objects previously read from it stay in force,
// and everything else is still delivered. A NetworkPolicy (or a pod) with
// an invalid field applies without it: a policy fails closed, so what it
// cannot read allows nothing.
package yamldir
