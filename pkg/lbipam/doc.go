// Package lbipam gives LoadBalancer Services their IPs, as a cloud's
// load-balancer controller would on bare metal (Cilium's LB-IPAM and
// MetalLB serve the same need): addresses come from
// NetworkLoadBalancerPools (a CRD), and netcube-operator (the replica
// holding a Lease; never a node's agent) writes each Service's
// status.loadBalancer.ingress.
// Every node then serves the addresses (the lb cube), and one elected
// node per address answers ARP and NDP for them on its uplinks
// (bpf/cubes/lb/announce.h, pkg/l2announce), so a host on the underlay
// reaches them with no route.
//
// Assign decides (no API, testable as a table); Controller reads the
// pools and Services, writes statuses and reports what cannot be
// assigned as Events; Elector holds the Lease. PoolGuard, in each agent,
// serves only the ingress addresses that lie in a pool.
package lbipam
