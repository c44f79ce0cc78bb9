package policy

import (
	"context"
	"net/http"

	"github.com/netcube/netcube/pkg/cube"
)

// Cube is the policy cube as the registry lists it: its Reconciler is
// given the cluster's pods, namespaces and NetworkPolicies and keeps the
// maps the datapath enforces (bpf/cubes/policy). With no policy, no pod is
// selected and a packet costs one lookup in pol_endpoints.
type Cube struct{}

var _ cube.Cube = Cube{}

func (Cube) Name() string { return "policy" }

func (Cube) Maps() []cube.MapSpec {
	return []cube.MapSpec{
		// (Resized when the cluster is: pkg/agent sizes pol_hosts from
		// its Pods; the identities carry over, so no peer is unknown
		// across the restart.)
		{Name: MapHosts, DefaultSize: 65536, SizeFlag: "policy-identity-map-size", Upgrade: samePeer},
		{Name: MapPeers, DefaultSize: 65536, SizeFlag: "policy-identity-map-size", Upgrade: samePeer},
		{Name: MapEndpoints, DefaultSize: 4096, SizeFlag: "router-endpoints-max", Upgrade: upgradeEndpoint},
		{Name: MapRules, DefaultSize: 262144, SizeFlag: "policy-map-size"},
		{Name: MapEntries, DefaultSize: 262144, SizeFlag: "policy-map-size"},
		{Name: MapRevision, DefaultSize: 1},
		{Name: MapScratch, DefaultSize: 1, Restart: true}, // per-packet room, and the memo (policy.h)
		{Name: MapDrops, DefaultSize: 16384},
	}
}

// Start starts the reconciler of this node.
func (Cube) Start(ctx context.Context, env cube.Env) (cube.Started, error) {
	r := NewReconciler(env.Maps, env.Node.Name, env.Node.Addrs)
	r.SetReporter(env.Report)
	go r.Run(ctx)
	return cube.Started{Metrics: r.Metrics(), Policy: r, Nodes: r, PodNames: r, PolicyNames: r,
		API: map[string]http.Handler{PodsPath: r.podsHandler(), IdentitiesPath: r.identitiesHandler(), TiersPath: r.tiersHandler(), VerdictPath: r.verdictHandler()}}, nil
}
