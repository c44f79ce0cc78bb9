package hubble

// What package hubble/metrics reads of the conversion from event to flow,
// so that its counts and the flows hubble observe shows agree.

import (
	"github.com/netcube/netcube/pkg/cube"
	"github.com/netcube/netcube/pkg/events"
	"github.com/netcube/netcube/pkg/hubble/flowpb"
)

// DropReason is Hubble's drop reason for one of netcube's (an
// events.DropReason name): the flow's drop_reason_desc
// (DROP_REASON_UNKNOWN for a name it does not know). Hubble's metrics
// (pkg/hubble/metrics) label drops with it, as the flows say.
func DropReason(name string) flowpb.DropReason { return dropReasons[name] }

// ObservationPoint is Hubble's observation point for one of netcube's
// hooks (events.Event.Point); UNKNOWN_POINT for the socket hook, which
// Hubble has none for.
func ObservationPoint(point string) flowpb.TraceObservationPoint { return points[point] }

// RoutePoint is where a route event's packet went (events.Event.Route),
// as Hubble names it.
func RoutePoint(route string) flowpb.TraceObservationPoint { return routePoints[route] }

// Flow is the flow the Observer API serves for event e on node.
func Flow(e events.Event, node string, names *cube.Names) *flowpb.Flow { return toFlow(e, node, names) }
