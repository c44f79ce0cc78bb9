package lbipam

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source/kube"
)

var services = schema.GroupVersionResource{Version: "v1", Resource: "services"}

// Controller assigns LoadBalancer IPs while its agent leads: it watches
// the pools and Services, and after each change (a burst once) runs
// Assign and writes the statuses that change.
type Controller struct {
	Client dynamic.Interface // the pools, and the Services' patches
	Config *rest.Config      // the Services' reads (serviceCache)
	// PageSize is the Services per list request (0: the default, as the
	// agent's own lists).
	PageSize int64
	Report   *report.Reporter

	// reported: the problems standing, so that a resolved one is cleared.
	reported map[report.Object]report.Reason
}

// Run assigns until ctx ends (the lease is lost, or the agent stops).
// Without the pools' CRD there is nothing to assign from: it looks again
// every 10 s.
func (c *Controller) Run(ctx context.Context) {
	for {
		_, err := c.Client.Resource(kube.NetworkLoadBalancerPools).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) {
			slog.Warn("LoadBalancer IPs: listing pools", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
	c.reported = map[report.Object]report.Reason{}
	kick := make(chan struct{}, 1)
	onChange := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	svcs, err := newServiceCache(c.Config, c.PageSize, onChange)
	if err != nil {
		slog.Error("LoadBalancer IPs: not assigned", "err", err)
		return
	}
	pools := informerFor(c.Client, kube.NetworkLoadBalancerPools)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { onChange() },
		UpdateFunc: func(any, any) { onChange() },
		DeleteFunc: func(any) { onChange() },
	}
	_, _ = pools.AddEventHandler(h)
	var running sync.WaitGroup
	defer running.Wait() // after ctx has ended: the readers stop with it
	running.Go(func() { svcs.run(ctx) })
	running.Go(func() { pools.Run(ctx.Done()) })
	select {
	case <-ctx.Done():
		return
	case <-svcs.synced:
	}
	if !cache.WaitForCacheSync(ctx.Done(), pools.HasSynced) {
		return
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			c.clearAll()
			return
		case <-kick:
		case <-retry.C:
		}
		time.Sleep(50 * time.Millisecond) // let a burst arrive
		if err := c.sync(ctx, svcs.services(), pools.GetStore().List()); err != nil {
			slog.Warn("LoadBalancer IPs: writing statuses, retrying", "err", err)
			retry.Reset(2 * time.Second)
		}
	}
}

// sync assigns from the cached objects (the concerned Services alone)
// and writes what changed.
func (c *Controller) sync(ctx context.Context, concernedSvcs []*corev1.Service, poolObjs []any) error {
	problems := map[report.Object]string{}
	var pools []*model.LBPool
	for _, o := range poolObjs {
		u := o.(*unstructured.Unstructured)
		obj := report.Object{Kind: "NetworkLoadBalancerPool", Name: u.GetName()}
		var api k8s.NetworkLoadBalancerPool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &api); err != nil {
			problems[obj] = fmt.Sprintf("not a NetworkLoadBalancerPool: %v", err)
			continue
		}
		p, err := k8s.ToLBPool(&api)
		if err != nil {
			problems[obj] = err.Error()
		}
		if p != nil {
			pools = append(pools, p)
		}
	}
	var svcs []*model.LBService
	finalizers := map[model.ServiceID]*corev1.Service{}
	for _, api := range concernedSvcs {
		s, err := k8s.ToLBService(api)
		if err != nil && s.Wants {
			problems[report.Object{Kind: "Service", Namespace: api.Namespace, Name: api.Name}] = err.Error() + "; no LoadBalancer IP assigned until it is fixed"
		}
		svcs = append(svcs, s)
		finalizers[s.ID] = api
	}
	res := Assign(pools, svcs)
	for p, why := range res.Pools {
		problems[report.Object{Kind: "NetworkLoadBalancerPool", Name: p}] = why
	}
	for id, why := range res.Services {
		obj := report.Object{Kind: "Service", Namespace: id.Namespace, Name: id.Name}
		if problems[obj] == "" {
			problems[obj] = "no LoadBalancer IP assigned: " + why
		}
	}
	c.setProblems(problems)
	var firstErr error
	for id, addrs := range res.Status {
		if err := c.writeStatus(ctx, id, addrs); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("Service %s: %w", id, err)
		}
	}
	if firstErr != nil {
		return firstErr // the finalizers go only once the addresses are back
	}
	for _, s := range svcs {
		api := finalizers[s.ID]
		has := slices.Contains(api.Finalizers, CleanupFinalizer)
		addrs, changed := res.Status[s.ID]
		if !changed {
			addrs = s.Current
		}
		want := s.Wants && len(addrs) > 0
		if want != has && (want || !s.Wants && s.Ours) {
			if err := c.setFinalizer(ctx, api, want); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("Service %s: %w", s.ID, err)
			}
		}
	}
	return firstErr
}

// CleanupFinalizer is the finalizer a cloud's load-balancer controller
// puts on a Service it gave addresses to, and removes once they are given
// back; the API server deletes the Service only then. netcube keeps the
// same contract (the sig-network e2e suite checks it).
const CleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// setFinalizer adds or removes CleanupFinalizer: a merge patch of the
// whole list, on the resource version read (a concurrent change makes it
// fail, and the next sync tries again).
func (c *Controller) setFinalizer(ctx context.Context, svc *corev1.Service, add bool) error {
	var list []string
	for _, f := range svc.Finalizers {
		if f != CleanupFinalizer {
			list = append(list, f)
		}
	}
	if add {
		list = append(list, CleanupFinalizer)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": list, "resourceVersion": svc.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = c.Client.Resource(services).Namespace(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// concerned says whether svc is a LoadBalancer or still holds addresses
// or the cleanup finalizer: the Services the assigner gives to or takes
// back from (serviceCache keeps these alone).
func concerned(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeLoadBalancer || len(svc.Status.LoadBalancer.Ingress) > 0 ||
		slices.Contains(svc.Finalizers, CleanupFinalizer)
}

// writeStatus sets status.loadBalancer.ingress to addrs (a merge patch of
// the status subresource: it replaces the list, and a retry writes the
// same).
func (c *Controller) writeStatus(ctx context.Context, id model.ServiceID, addrs []netip.Addr) error {
	ingress := make([]map[string]any, 0, len(addrs))
	for _, a := range addrs {
		ingress = append(ingress, map[string]any{"ip": a.String(), "ipMode": "VIP"})
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": ingress}}})
	if err != nil {
		return err
	}
	_, err = c.Client.Resource(services).Namespace(id.Namespace).Patch(ctx, id.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile: nothing to give back
	}
	if err == nil {
		slog.Info("LoadBalancer IPs written", "service", id.String(), "ips", addrs)
	}
	return err
}

// setProblems reports each standing problem on its object and clears the
// ones gone.
func (c *Controller) setProblems(now map[report.Object]string) {
	for obj, msg := range now {
		reason := report.LoadBalancerIPNotAssigned
		if obj.Kind == "NetworkLoadBalancerPool" {
			reason = report.PoolConflict
		}
		c.Report.Set(obj, reason, msg)
		c.reported[obj] = reason
	}
	for obj, reason := range c.reported {
		if _, ok := now[obj]; !ok {
			c.Report.Clear(obj, reason)
			delete(c.reported, obj)
		}
	}
}

// clearAll forgets the problems this agent reported: another agent leads
// now, and reports what still stands.
func (c *Controller) clearAll() { c.setProblems(nil) }
