package lbipam

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source/kube"
)

// PoolGuard stands between an agent's state source and its Service
// handler when netcube assigns the LoadBalancer IPs: it passes each
// Service on with only the status.loadBalancer.ingress addresses that lie
// in a NetworkLoadBalancerPool, and names the others in a Warning Event
// (IngressOutsidePools). Whoever can write a Service's status (a stolen
// credential, a buggy controller) then cannot make every node serve, and
// answer ARP and NDP for, an address of its choosing (another Service's,
// a router's): only the pools' addresses, which the cluster's admin set
// aside, are served.
//
// A Service of another loadBalancerClass is passed on as it is: its
// addresses are its controller's (MetalLB's, a cloud's), which netcube's
// pools do not describe. When the pools change, the Services whose served
// addresses change are passed on again.
type PoolGuard struct {
	// Next receives the Services as they are to be programmed.
	Next   func(key types.NamespacedName, svc *model.Service)
	Report *report.Reporter

	mu     sync.Mutex
	pools  []netip.Prefix
	synced chan struct{}
	once   sync.Once
	// delivered: the Services with ingress addresses, as the source
	// handed them on (to filter again when the pools change), and what
	// was passed on of each.
	delivered map[types.NamespacedName]guarded
}

type guarded struct {
	given  *model.Service
	served []netip.Addr
}

func (g *PoolGuard) init() {
	g.once.Do(func() {
		g.synced = make(chan struct{})
		g.delivered = map[types.NamespacedName]guarded{}
	})
}

// Synced is closed once the pools have been read (or found not served):
// until then no Service should be handed to the guard, or its addresses
// would go out and come back.
func (g *PoolGuard) Synced() <-chan struct{} {
	g.init()
	return g.synced
}

// OnService passes svc on, without the ingress addresses in no pool.
func (g *PoolGuard) OnService(key types.NamespacedName, svc *model.Service) {
	g.init()
	g.mu.Lock()
	defer g.mu.Unlock()
	if svc == nil || svc.External == nil || len(svc.External.LoadBalancerIPs) == 0 || svc.External.ForeignLoadBalancer {
		if _, had := g.delivered[key]; had {
			delete(g.delivered, key)
			g.Report.Clear(serviceObject(key), report.IngressOutsidePools)
		}
		g.Next(key, svc)
		return
	}
	out, served := g.filter(key, svc)
	g.delivered[key] = guarded{given: svc, served: served}
	g.Next(key, out)
}

// SetPools replaces the pools' CIDRs and passes on again each Service
// whose served addresses change.
func (g *PoolGuard) SetPools(cidrs []netip.Prefix) {
	g.init()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pools = slices.Clone(cidrs)
	for key, d := range g.delivered {
		out, served := g.filter(key, d.given)
		if slices.Equal(served, d.served) {
			continue
		}
		g.delivered[key] = guarded{given: d.given, served: served}
		g.Next(key, out)
	}
}

// filter is svc with the ingress addresses in no pool left out (svc
// itself when none is), and the addresses kept; the ones left out are
// reported. Called with mu held.
func (g *PoolGuard) filter(key types.NamespacedName, svc *model.Service) (*model.Service, []netip.Addr) {
	var kept, outside []netip.Addr
	for _, a := range svc.External.LoadBalancerIPs {
		if g.inPool(a) {
			kept = append(kept, a)
		} else {
			outside = append(outside, a)
		}
	}
	if len(outside) == 0 {
		g.Report.Clear(serviceObject(key), report.IngressOutsidePools)
		return svc, kept
	}
	names := make([]string, len(outside))
	for i, a := range outside {
		names[i] = a.String()
	}
	g.Report.Set(serviceObject(key), report.IngressOutsidePools, fmt.Sprintf(
		"status.loadBalancer.ingress: %s in no NetworkLoadBalancerPool; not served (netcube assigns this cluster's LoadBalancer IPs, from its pools alone)",
		strings.Join(names, ", ")))
	c := *svc
	ext := *svc.External
	ext.LoadBalancerIPs = kept
	c.External = &ext
	return &c, kept
}

func (g *PoolGuard) inPool(a netip.Addr) bool {
	for _, p := range g.pools {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func serviceObject(key types.NamespacedName) report.Object {
	return report.Object{Kind: "Service", Namespace: key.Namespace, Name: key.Name}
}

// Watch reads the pools through client and keeps the guard's CIDRs up to
// date until ctx ends. Without the pools' CRD there is no pool (no
// ingress address is served): it looks again every 10 s.
func (g *PoolGuard) Watch(ctx context.Context, client dynamic.Interface) {
	g.init()
	for {
		_, err := client.Resource(kube.NetworkLoadBalancerPools).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		if apierrors.IsNotFound(err) {
			g.markSynced() // no CRD: no pool, nothing to wait for
		} else {
			slog.Warn("LoadBalancer IPs: listing pools (no ingress address is served until they are read)", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
	inf := informerFor(client, kube.NetworkLoadBalancerPools)
	update := func() { g.SetPools(poolCIDRs(inf.GetStore().List())) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { update() },
		UpdateFunc: func(any, any) { update() },
		DeleteFunc: func(any) { update() },
	})
	go inf.Run(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		update()
		g.markSynced()
	}
	<-ctx.Done()
}

func (g *PoolGuard) markSynced() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.synced:
	default:
		close(g.synced)
	}
}

// poolCIDRs are the CIDRs of the pools that can be read (an unreadable
// CIDR is left out: the assigner reports it).
func poolCIDRs(objs []any) []netip.Prefix {
	var out []netip.Prefix
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var api k8s.NetworkLoadBalancerPool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &api); err != nil {
			continue
		}
		if p, _ := k8s.ToLBPool(&api); p != nil {
			out = append(out, p.CIDRs...)
		}
	}
	return out
}
