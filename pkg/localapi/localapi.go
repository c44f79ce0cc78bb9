// Package localapi is what the agent's local API (its --api-socket) and
// the netcube CLI both speak beyond the cubes' own paths: the agent's
// status. Kept apart from package agent so that the CLI does not link the
// agent.
package localapi

import "time"

// StatusPath is where the local API says how the agent is: Status.
const StatusPath = "/v1/status"

// Status is the agent as `netcube status` shows it.
type Status struct {
	Node    string    `json:"node"`
	Started time.Time `json:"started"`
	// Synced: the first sync of Services is applied; LastSync is when the
	// datapath last applied one (zero: never).
	Synced   bool      `json:"synced"`
	LastSync time.Time `json:"last_sync,omitzero"`
	// PolicySynced: the first sync of NetworkPolicies is written (nil: no
	// cube enforces them). Until it is, the CNI socket refuses ADD.
	PolicySynced *bool `json:"policy_synced,omitempty"`
	// Failing are the objects whose last apply failed (retried): Services,
	// and the policy maps and each pod whose NetworkPolicy they lack
	// ("Pod ns/name": quarantined, or left as the maps held it).
	Failing map[string]string `json:"failing,omitempty"`
}
