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
	// NotApplied are the policies whose last update is not enforced as
	// written ("ClusterNetworkPolicy name": what could not be read, and
	// what is enforced instead, e.g. the last good version). They do not
	// make the agent unready: the policy's author has an Event too.
	NotApplied map[string]string `json:"not_applied,omitempty"`
}

// BGPPath is where the local API says what the node's BGP speaker runs
// and announces: BGPStatus.
const BGPPath = "/v1/bgp"

// BGPStatus is the node's BGP speaker as `netcube bgp` shows it.
type BGPStatus struct {
	// Active: a NetworkBGPPeering selects this node and the speaker runs.
	Active   bool      `json:"active"`
	LocalASN uint32    `json:"local_asn,omitempty"`
	RouterID string    `json:"router_id,omitempty"`
	Peers    []BGPPeer `json:"peers,omitempty"`
	// Routes are the prefixes announced to every peer.
	Routes []BGPRoute `json:"routes,omitempty"`
	// Error is the last apply's, retried ("": it converged).
	Error     string    `json:"error,omitempty"`
	AppliedAt time.Time `json:"applied_at,omitzero"`
}

// BGPPeer is one session.
type BGPPeer struct {
	Address string `json:"address"`
	ASN     uint32 `json:"asn"`
	// State: idle, connect, active, opensent, openconfirm or established.
	State      string        `json:"state"`
	Uptime     time.Duration `json:"uptime,omitempty"`
	Advertised uint64        `json:"advertised"`
	Received   uint64        `json:"received"`
	// Accepted is always 0: nothing is imported from a peer.
	Accepted uint64 `json:"accepted"`
}

// BGPRoute is one announced prefix.
type BGPRoute struct {
	Prefix      string   `json:"prefix"`
	NextHop     string   `json:"next_hop,omitempty"` // "": the session's own address
	Communities []string `json:"communities,omitempty"`
	LocalPref   uint32   `json:"local_pref,omitempty"`
}
