package controlplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/pkg/datapath"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/source/kube"
)

// TestIngressOutsidePoolsNotServed: a compromised node (once every agent
// could) holds the LoadBalancer IP Lease, so that no honest assigner
// corrects it, and writes two LoadBalancer IPs into a Service's status,
// one in the cluster's NetworkLoadBalancerPool and one in none (another
// Service's address, a router's). The agent serves the pool's (the
// positive control), never the other, and names it in a Warning Event;
// a pool made to hold it makes it served, the pool's removal takes it
// away again. An agent told that another controller assigns the
// addresses (--load-balancer-ips=false) serves both, as before.
func TestIngressOutsidePoolsNotServed(t *testing.T) {
	installPoolCRD(t)
	c, d, ns := env.Client, dynClient(t), "default"
	if _, err := d.Resource(kube.NetworkLoadBalancerPools).Create(ctx(t), lbPool(t, "guard-pool", `"192.0.2.224/28"`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Resource(kube.NetworkLoadBalancerPools).Delete(ctx(t), "guard-pool", metav1.DeleteOptions{})
	})
	holdLease(t, "compromised-node")
	a := startAgent(t, pinDir(t))
	otherPins := pinDir(t) + "-ipam-off" // pinDir is one per test
	t.Cleanup(func() { _ = datapath.Unpin(otherPins) })
	other := startAgent(t, otherPins, "--load-balancer-ips=false")

	svc := service(ns, "guarded", nil)
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	created, err := c.CoreV1().Services(ns).Create(ctx(t), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Services(ns).Delete(ctx(t), "guarded", metav1.DeleteOptions{}) })
	created.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.230"}, {IP: "198.51.100.9"}}
	if _, err := c.CoreV1().Services(ns).UpdateStatus(ctx(t), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	served := func(pins, ip string) bool {
		_, ok := programmed(t, pins)[model.Frontend{Addr: netip.MustParseAddr(ip), Port: 80, Proto: model.TCP}]
		return ok
	}
	testenv.WaitFor(t, bound, "the pool's LoadBalancer IP served", func() bool { return served(a.pins, "192.0.2.230") })
	if served(a.pins, "198.51.100.9") {
		t.Error("198.51.100.9, in no pool, is served")
	}
	if msg := eventFor(t, ns, "Service", "guarded", "IngressOutsidePools"); !strings.Contains(msg, "198.51.100.9 in no NetworkLoadBalancerPool") {
		t.Errorf("the Event does not name the address: %q", msg)
	}
	testenv.WaitFor(t, bound, "with --load-balancer-ips=false both served", func() bool {
		return served(other.pins, "192.0.2.230") && served(other.pins, "198.51.100.9")
	})

	if _, err := d.Resource(kube.NetworkLoadBalancerPools).Create(ctx(t), lbPool(t, "guard-pool-2", `"198.51.100.0/24"`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "a pool holding 198.51.100.9 makes it served", func() bool { return served(a.pins, "198.51.100.9") })
	if err := d.Resource(kube.NetworkLoadBalancerPools).Delete(ctx(t), "guard-pool-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, bound, "the pool deleted, 198.51.100.9 no longer served", func() bool { return !served(a.pins, "198.51.100.9") })
	time.Sleep(200 * time.Millisecond)
	if !served(a.pins, "192.0.2.230") {
		t.Error("the pool's address went with the other pool")
	}
}

// holdLease makes holder the holder of the LoadBalancer IP Lease, freshly
// renewed for an hour, until the test ends (then it is let go).
func holdLease(t *testing.T, holder string) {
	t.Helper()
	leases := env.Client.CoordinationV1().Leases("kube-system")
	l, err := leases.Get(ctx(t), "netcube-lb-ipam", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l, err = leases.Create(ctx(t), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "netcube-lb-ipam", Namespace: "kube-system"}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NowMicro()
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr[int32](3600), AcquireTime: &now, RenewTime: &now}
	if _, err := leases.Update(ctx(t), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l, err := leases.Get(context.Background(), "netcube-lb-ipam", metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == holder {
			l.Spec.HolderIdentity = ptr("")
			_, _ = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		}
	})
}
