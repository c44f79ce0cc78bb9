// Package yamldir is a Source reading Services, EndpointSlices and Nodes
// (their pod CIDRs) from a directory of Kubernetes YAML (or JSON) files,
// watching it for changes.
//
// Each file may hold several documents. Every change is delivered per
// object: editing one Service in one file emits exactly that Service. A file
// that does not parse, or an object that is invalid, is reported with the
// file and object named; the objects previously read from it stay in force,
// and everything else is still delivered.
package yamldir
