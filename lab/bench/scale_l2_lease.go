package bench

// bench scale-l2's comparison: the API cost of electing L2 announcers as
// Cilium does, one coordination.k8s.io Lease per Service, each renewed
// by its holder every l2announcements.leaseRetryPeriod (2 s by default:
// client-go's leader election renews the Lease it holds, with one PUT,
// every RetryPeriod). Replayed here by a pool of goroutines against the
// same API server, holders' renewals only: the other nodes' electors,
// which GET each Lease every RetryPeriod too, are not (the report gives
// their rate as arithmetic).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netcube/netcube/lab/kubeenv"
)

// leaseNS is where Cilium keeps its L2 Leases.
const leaseNS = "kube-system"

// leaseWorkers renew the Leases; each renewal a PUT of a few hundred
// bytes, so a few dozen keep 500/s with the API server's latency.
const leaseWorkers = 48

type leaseReplay struct {
	client   kubernetes.Interface
	leases   []*coordinationv1.Lease
	every    time.Duration
	done     atomic.Int64
	failed   atomic.Int64
	mu       sync.Mutex
	firstErr error
}

// newLeaseReplay creates (or takes over) one Lease per Service, each
// held by one of the n nodes.
func newLeaseReplay(env *kubeenv.Env, services, n int, every time.Duration) (*leaseReplay, error) {
	rc := rest.CopyConfig(env.Config)
	rc.QPS, rc.Burst = 1e6, 1e6 // the replay's rate is its schedule's, not a client limiter's
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	lr := &leaseReplay{client: c, every: every}
	ctx := context.Background()
	dur := int32(15) // l2announcements.leaseDuration's default
	for i := range services {
		holder, now := hollowNode(i%n), metav1.NewMicroTime(time.Now())
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cilium-l2announce-%s-%s", benchNS, serviceName(i)), Namespace: leaseNS},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now}}
		got, err := c.CoordinationV1().Leases(leaseNS).Create(ctx, l, metav1.CreateOptions{})
		if err != nil {
			if got, err = c.CoordinationV1().Leases(leaseNS).Get(ctx, l.Name, metav1.GetOptions{}); err != nil {
				return nil, fmt.Errorf("lease %s: %w", l.Name, err)
			}
		}
		lr.leases = append(lr.leases, got)
	}
	return lr, nil
}

// run renews every Lease every lr.every for d: Lease i due at i/len of
// the period into each period, as holders that started at random times.
func (lr *leaseReplay) run(d time.Duration) {
	start := time.Now()
	var wg sync.WaitGroup
	for w := range leaseWorkers {
		wg.Go(func() {
			for round := 0; time.Duration(round)*lr.every < d; round++ {
				for i := w; i < len(lr.leases); i += leaseWorkers {
					due := start.Add(time.Duration(round)*lr.every + time.Duration(i)*lr.every/time.Duration(len(lr.leases)))
					if due.Sub(start) >= d {
						return
					}
					time.Sleep(time.Until(due))
					lr.renew(i)
				}
			}
		})
	}
	wg.Wait()
}

// renew is the holder's renewal as client-go does it: the Lease it last
// wrote, its renewTime now, PUT.
func (lr *leaseReplay) renew(i int) {
	l := lr.leases[i].DeepCopy()
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	got, err := lr.client.CoordinationV1().Leases(leaseNS).Update(context.Background(), l, metav1.UpdateOptions{})
	if err != nil {
		lr.failed.Add(1)
		lr.mu.Lock()
		if lr.firstErr == nil {
			lr.firstErr = err
		}
		lr.mu.Unlock()
		return
	}
	lr.leases[i] = got // one worker per Lease: no race
	lr.done.Add(1)
}
