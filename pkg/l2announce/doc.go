// Package l2announce elects, for each LoadBalancer IP, the one node that
// answers ARP and IPv6 neighbour solicitations for it on the underlay
// (the lb cube's lb_announce, bpf/cubes/lb/announce.h), and makes a
// newly elected node tell the link at once (gratuitous ARP, unsolicited
// Neighbor Advertisement), so that a client's switch and neighbour cache
// follow a failover within about a second instead of waiting for their
// entry to go stale.
//
// Nothing is written to the API server. Membership: each agent sends a
// small UDP heartbeat (Heartbeat; port DefaultPort) every Interval to
// every other node's addresses as its Node object lists them, and counts
// a node alive while it heard one within Misses intervals, from an
// address that node's Node object lists. Election (Elect): among the
// eligible nodes that are alive (every node for externalTrafficPolicy
// Cluster, the nodes with a ready endpoint for Local), the one with the
// highest rendezvous hash of the address and its name; every agent
// computes the same answer from the same view, a node's death moves only
// its addresses, and a node joining takes only its share.
package l2announce
