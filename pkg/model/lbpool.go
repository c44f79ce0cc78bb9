package model

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/labels"
)

// LBPool is a NetworkLoadBalancerPool: addresses netcube's leader gives
// to LoadBalancer Services (package lbipam).
type LBPool struct {
	Name string
	// Created orders pools (metadata.creationTimestamp, Unix seconds): of
	// two that overlap, the older one is used.
	Created int64
	CIDRs   []netip.Prefix
	// Services selects the Services it serves (nil: every one).
	Services labels.Selector
}

// LBService is what LoadBalancer IP assignment reads of a Service.
type LBService struct {
	ID      ServiceID
	Created int64
	Labels  labels.Set
	// Wants: type LoadBalancer and netcube's class (or none).
	Wants bool
	// Ours: netcube's class or none, whatever the type (a Service that
	// was a LoadBalancer has its addresses taken back).
	Ours bool
	// Hold: the Service asks for addresses netcube cannot read; it keeps
	// what it has and gets nothing new.
	Hold bool
	// Families are spec.ipFamilies, in order (IPv4 or IPv6 addresses
	// wanted, one each).
	Families []Family
	// Requested are the addresses asked for (spec.loadBalancerIP, the
	// netcube.io/load-balancer-ips annotation); none: any.
	Requested []netip.Addr
	// Current is status.loadBalancer.ingress's addresses.
	Current []netip.Addr
}

// Family is an IP family.
type Family uint8

const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// FamilyOf is a's family.
func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}
