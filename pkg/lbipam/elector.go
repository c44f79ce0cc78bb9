package lbipam

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Leases is coordination.k8s.io's Lease resource.
var Leases = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// Elector holds a Lease while it can, as client-go's leader election
// does, through the dynamic client the agent already has (client-go's
// typed clients would register every API group: memory the agent does
// not spend). A lease is someone else's while its holder renews it; one
// not renewed for Duration, as this agent's own clock measures (so clocks
// need not agree), may be taken.
type Elector struct {
	Client    dynamic.Interface
	Namespace string
	Name      string
	Identity  string
	Duration  time.Duration // default 15 s
	Retry     time.Duration // how often to renew or try (default 5 s, jittered)
	// Lead runs while this agent holds the lease, with a context that
	// ends when it loses it.
	Lead func(context.Context)

	observed   string // the lease's holder and renew time last read
	observedAt time.Time
}

func (e *Elector) defaults() {
	if e.Duration == 0 {
		e.Duration = 15 * time.Second
	}
	if e.Retry == 0 {
		e.Retry = 5 * time.Second
	}
}

// Run calls Lead with a context that lives while this agent holds the
// lease, as many times as it gains it, until ctx ends; then it lets the
// lease go, so that another agent takes over at once.
func (e *Elector) Run(ctx context.Context) {
	lead := e.Lead
	e.defaults()
	var cancel context.CancelFunc
	done := make(chan struct{})
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel = nil
		}
	}
	for {
		held, err := e.tryAcquireOrRenew(ctx)
		if err != nil && ctx.Err() == nil {
			slog.Warn("LoadBalancer IPs: lease", "lease", e.Namespace+"/"+e.Name, "err", err)
		}
		switch {
		case held && cancel == nil:
			slog.Info("LoadBalancer IPs: this agent assigns them (lease held)", "lease", e.Namespace+"/"+e.Name)
			lctx, c := context.WithCancel(ctx)
			cancel = c
			done = make(chan struct{})
			go func() { defer close(done); lead(lctx) }()
		case !held && cancel != nil:
			slog.Info("LoadBalancer IPs: lease lost", "lease", e.Namespace+"/"+e.Name)
			stop()
		}
		wait := e.Retry/2 + rand.N(e.Retry)
		if held {
			wait = e.Retry
		}
		select {
		case <-ctx.Done():
			stop()
			if held {
				e.release()
			}
			return
		case <-time.After(wait):
		}
	}
}

func (e *Elector) leases() dynamic.ResourceInterface {
	return e.Client.Resource(Leases).Namespace(e.Namespace)
}

// tryAcquireOrRenew renews the lease if this agent holds it, takes it if
// it is free or expired, and says whether this agent holds it now.
func (e *Elector) tryAcquireOrRenew(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, e.Retry)
	defer cancel()
	now := metav1.NowMicro()
	l, err := e.leases().Get(ctx, e.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
			"metadata": map[string]any{"name": e.Name, "namespace": e.Namespace},
			"spec":     e.spec(now, now, 0),
		}}
		_, err = e.leases().Create(ctx, l, metav1.CreateOptions{})
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	holder, _, _ := unstructured.NestedString(l.Object, "spec", "holderIdentity")
	renewed, _, _ := unstructured.NestedString(l.Object, "spec", "renewTime")
	acquired, _, _ := unstructured.NestedString(l.Object, "spec", "acquireTime")
	transitions, _, _ := unstructured.NestedInt64(l.Object, "spec", "leaseTransitions")
	if seen := holder + " " + renewed; seen != e.observed {
		e.observed, e.observedAt = seen, time.Now()
	}
	if holder != e.Identity && holder != "" && time.Since(e.observedAt) < e.Duration {
		return false, nil
	}
	spec := e.spec(now, now, transitions+1)
	if holder == e.Identity {
		spec["acquireTime"], spec["leaseTransitions"] = acquired, transitions
	}
	l.Object["spec"] = spec
	// The update carries the resourceVersion read: of two agents taking
	// an expired lease, one gets a conflict.
	if _, err := e.leases().Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (e *Elector) spec(acquired, renewed metav1.MicroTime, transitions int64) map[string]any {
	a, _ := acquired.MarshalJSON()
	r, _ := renewed.MarshalJSON()
	return map[string]any{
		"holderIdentity":       e.Identity,
		"leaseDurationSeconds": int64(e.Duration / time.Second),
		"acquireTime":          string(a[1 : len(a)-1]),
		"renewTime":            string(r[1 : len(r)-1]),
		"leaseTransitions":     transitions,
	}
}

// release empties the holder, so that the next agent to try takes the
// lease without waiting for it to expire.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l, err := e.leases().Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		return
	}
	if h, _, _ := unstructured.NestedString(l.Object, "spec", "holderIdentity"); h != e.Identity {
		return
	}
	_ = unstructured.SetNestedField(l.Object, "", "spec", "holderIdentity")
	_, _ = e.leases().Update(ctx, l, metav1.UpdateOptions{})
}
