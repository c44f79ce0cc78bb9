package l2announce

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"time"
)

// APIPath is where the agent's local API serves Status (GET, JSON).
const APIPath = "/v1/l2announce"

// Status is what a node's agent says of the election: the nodes it
// counts alive, what it knows of the others, and the LoadBalancer IPs
// it announces (those the lb cube last asked about and it was elected
// for: the addresses its lb_announce holds).
type Status struct {
	Node       string       `json:"node"`
	Alive      []string     `json:"alive"`
	Peers      []PeerStatus `json:"peers"`
	Announcing []netip.Addr `json:"announcing"`
	Accepted   uint64       `json:"heartbeatsAccepted"`
	Refused    uint64       `json:"heartbeatsRefused"`
	Now        time.Time    `json:"now"`
}

// Status is the elector's and its membership's state now.
func (e *Elector) Status() Status {
	acc, ref := e.m.Counters()
	return Status{Node: e.m.self, Alive: e.m.Alive(), Peers: e.m.Peers(), Announcing: e.Announcing(),
		Accepted: acc, Refused: ref, Now: e.m.now()}
}

// Handler serves Status.
func (e *Elector) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(e.Status())
	})
}
