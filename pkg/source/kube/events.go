package kube

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/netcube/netcube/pkg/report"
)

// EventSink writes each reported problem as a Warning Event on its object,
// where `kubectl describe` and `kubectl get events` show it. Events wait in
// a bounded queue so that whoever reports never waits for the API server;
// when the queue is full an Event is dropped (the problem is still logged
// and counted).
type EventSink struct {
	c     *client
	node  string
	queue chan problem
}

// eventQueue bounds the Events waiting to be written: as client-go's
// recorder does (its 1,000), a flood of bad objects is all written, a
// bigger one in part.
const eventQueue = 1024

type problem struct {
	obj    report.Object
	reason report.Reason
	msg    string
}

var _ report.Sink = (*EventSink)(nil)

// NewEventSink returns a sink writing Events through the API server cfg
// names, as the agent of node.
func NewEventSink(cfg *rest.Config, node string) (*EventSink, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	return &EventSink{c: c, node: node, queue: make(chan problem, eventQueue)}, nil
}

// Warn implements report.Sink.
func (e *EventSink) Warn(obj report.Object, reason report.Reason, msg string) {
	select {
	case e.queue <- problem{obj, reason, msg}:
	default:
		slog.Warn("event queue full, event dropped", "object", obj.String(), "reason", string(reason))
	}
}

// Run writes the queued Events until ctx ends.
func (e *EventSink) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-e.queue:
			if err := e.write(ctx, p); err != nil {
				slog.Error("writing event", "object", p.obj.String(), "reason", string(p.reason), "err", err)
			}
		}
	}
}

// write creates the Event, naming the object by UID (read now: the agent
// keeps no API objects) so that `kubectl describe` finds it.
func (e *EventSink) write(ctx context.Context, p problem) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ref, ok, err := e.reference(ctx, p.obj)
	if !ok || err != nil {
		return err
	}
	msg := p.msg
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	// A cluster-scoped object's Events live in "default", as kubectl
	// describe looks for them.
	ns := p.obj.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: p.obj.Name + ".", Namespace: ns},
		InvolvedObject:      ref,
		Reason:              string(p.reason),
		Message:             msg,
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "netcube-agent", Host: e.node},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "netcube.io/agent",
		ReportingInstance:   e.node,
	}
	return e.c.core.Post().Namespace(ns).Resource("events").Body(ev).Do(ctx).Error()
}

// NetworkLoadBalancerPools is the resource of the NetworkLoadBalancerPool
// CRD (deploy/helm/netcube/crds), which pkg/lbipam assigns from.
var NetworkLoadBalancerPools = schema.GroupVersionResource{Group: "netcube.io", Version: "v1alpha1", Resource: "networkloadbalancerpools"}

// clusterCRDs are netcube's cluster-scoped resources, by kind.
var clusterCRDs = map[string]schema.GroupVersionResource{
	"NetworkSlice":            NetworkSlices,
	"NetworkLoadBalancerPool": NetworkLoadBalancerPools,
	"NodePods":                NodePodsResource,
	"NetworkBGPPeering":       NetworkBGPPeerings,
	"ClusterNetworkPolicy":    ClusterNetworkPolicies, // SIG Network's, not netcube's: Events on it all the same
}

// reference reads obj's UID and resource version (ok false: not an API
// object Events are written on).
func (e *EventSink) reference(ctx context.Context, obj report.Object) (ref corev1.ObjectReference, ok bool, err error) {
	ref = corev1.ObjectReference{Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name}
	var m metav1.Object
	if crd, ok := clusterCRDs[obj.Kind]; ok {
		ref.APIVersion = crd.GroupVersion().String()
		u, err := e.c.dynamic.Resource(crd).Get(ctx, obj.Name, metav1.GetOptions{})
		if err != nil {
			return ref, true, err
		}
		m = u
	} else {
		var rc *rest.RESTClient
		var into runtime.Object
		switch obj.Kind {
		case "Service":
			rc, into, ref.APIVersion = e.c.core, &corev1.Service{}, "v1"
		case "EndpointSlice":
			rc, into, ref.APIVersion = e.c.discovery, &discoveryv1.EndpointSlice{}, discoveryv1.SchemeGroupVersion.String()
		case "NetworkPolicy":
			rc, into, ref.APIVersion = e.c.networking, &networkingv1.NetworkPolicy{}, networkingv1.SchemeGroupVersion.String()
		case "Pod":
			rc, into, ref.APIVersion = e.c.core, &corev1.Pod{}, "v1"
		default:
			return ref, false, nil
		}
		resource := map[string]string{"Service": "services", "EndpointSlice": "endpointslices",
			"NetworkPolicy": "networkpolicies", "Pod": "pods"}[obj.Kind]
		if err := rc.Get().Namespace(obj.Namespace).Resource(resource).Name(obj.Name).Do(ctx).Into(into); err != nil {
			return ref, true, err
		}
		m, _ = into.(metav1.Object)
	}
	ref.UID, ref.ResourceVersion = m.GetUID(), m.GetResourceVersion()
	return ref, true, nil
}
