package qos

import (
	"context"

	"github.com/netcube/netcube/pkg/cube"
)

// Cube is the QoS cube as the registry lists it: pods, namespaces and
// NetworkSlices in; which slice each pod of this node is in, its DSCP,
// priority and rate out (bpf/cubes/qos, its hook on what pods send).
type Cube struct{}

var (
	_ cube.Cube   = Cube{}
	_ cube.Hooked = Cube{}
)

func (Cube) Name() string { return "qos" }

func (Cube) Maps() []cube.MapSpec {
	return []cube.MapSpec{{Name: MapPods}, {Name: MapSlices}, {Name: MapBuckets}, {Name: MapConfig, Restart: true}}
}

// Hooks: classify, mark and pace what a pod sends, as it enters from_pod;
// send what a pod with an ingress rate receives through its veth's shaper;
// give a pod's packet its class again as it leaves by an uplink (the
// kernel's forwarding resets it).
func (Cube) Hooks() cube.Hooks {
	return cube.Hooks{Header: "cubes/qos/qos.h", FromPod: "qos_from_pod", ToPod: "qos_to_pod", ToNet: "qos_to_net"}
}

// Start runs the cube's reconciler: the agent gives it the NetworkSlices,
// pods and namespaces (Started.Slices); the uplinks' queueing follows.
func (Cube) Start(ctx context.Context, env cube.Env) (cube.Started, error) {
	rec := NewReconciler(env.Node.Name, NewTables(env.Maps), env.Report)
	q := &queueing{maps: env.Maps, uplinks: env.Settings.Uplinks, rate: env.Settings.UplinkRate}
	rec.onApplied = q.set
	if !env.Settings.Hollow { // a hollow node has no pod veths to shape
		rec.onShaped = (&podShaping{prefix: env.Settings.PodIfacePrefix}).set
	}
	go rec.Run(ctx)
	return cube.Started{Slices: rec, Metrics: rec.metrics.collectors()}, nil
}
