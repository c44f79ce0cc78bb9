// Package hubble serves Hubble's Observer gRPC API from netcube's datapath
// events, so that the real hubble CLI (hubble observe, hubble status) and
// any Hubble client read netcube's flows: each event becomes a flow.Flow
// with Hubble's own verdict, drop reason, observation point and event
// type, named by pod, namespace, labels and Service (cube.Names); a
// request's filters are evaluated here, and a filter this server does not
// know is refused rather than ignored. The message types are netcube's
// subset of Hubble's .proto files (api/hubble), generated into flowpb and
// observerpb. Package hubble/metrics counts the same events as Hubble's
// metrics, reading the conversion here (Flow, DropReason, ObservationPoint,
// RoutePoint).
package hubble
