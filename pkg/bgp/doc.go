// Package bgp is the netcube agent's BGP speaker: it advertises a node's pod
// CIDRs and its Services' LoadBalancer IPs and ExternalIPs (as /32 and /128)
// to the top-of-rack routers it peers with, on GoBGP (github.com/osrg/gobgp/v3)
// used as a library.
//
// The agent hands Speaker.Apply the whole desired state (a Config and the
// routes) every time; Apply diffs it against what it applied last and makes
// only the changes: it is idempotent, an unchanged state costs nothing, and a
// failed Apply is retried by calling it again.
//
// The speaker only announces. Nothing a router sends it is accepted (the
// global import policy rejects every path but the speaker's own: a router
// sending it a full table changes nothing) and nothing is ever installed
// into the kernel: GoBGP's zebra integration is never enabled, and GoBGP on
// its own touches no routing table.
//
// Stop(ctx, true) is meant for an agent restart or upgrade: it closes the
// TCP sessions without a BGP NOTIFICATION, so that a router with graceful
// restart (RFC 4724) keeps the routes as stale until the next agent
// re-announces them or the restart time runs out. See Speaker.Stop for why
// GoBGP's own StopBgp cannot do this.
package bgp
