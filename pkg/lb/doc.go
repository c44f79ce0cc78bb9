// Package lb is the Go side of the load-balancer cube (bpf/lib/lb.h). It owns
// the lb_services, lb_backends and lb_revnat maps: it turns "frontend F has
// backends B" into the few map writes that change, in an order that never
// lets a packet see a half-written Service, and it can rebuild its view of
// the maps after an agent restart. It does not know about Kubernetes.
package lb
