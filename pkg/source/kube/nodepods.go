package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/k8s"
	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// Where the policy cube's pods come from (Source.PodSource).
const (
	// PodsFromAPI: every Pod object of the cluster, watched by every
	// agent (as kube-proxy's peers that enforce NetworkPolicy do).
	PodsFromAPI = "pods"
	// PodsFromNodePods: this node's Pod objects, and every other node's
	// NodePods, which each node's agent writes from its own.
	PodsFromNodePods = "nodepods"
)

// NodePodsResource is the resource of the NodePods CRD
// (deploy/helm/netcube/crds).
var NodePodsResource = schema.GroupVersionResource{Group: "netcube.io", Version: "v1alpha1", Resource: "nodepods"}

// fieldManager is the agent's name in the fields it applies.
const fieldManager = "netcube-agent"

// nodePodsDebounce gathers a burst of local pod changes (a Deployment's
// pods starting together) into one write of this node's NodePods.
const nodePodsDebounce = 50 * time.Millisecond

// newPodClaims merges the pods of --pod-source=nodepods for h, and
// reports the NodePods whose pods are not used.
func (s *Source) newPodClaims(h source.PolicyHandler) *podClaims {
	c := newPodClaims(h.OnPod)
	c.refuse = func(node, problem string) {
		s.Report.Set(report.Object{Kind: "NodePods", Name: node}, report.PodOutsideNode, problem)
	}
	return c
}

// runNodePodSources starts the pod streams of --pod-source=nodepods: this
// node's Pod objects (a field selector on spec.nodeName) and every
// NodePods object but this node's own, merged by s.claims, and the writer
// of this node's NodePods. Its synced functions include the Nodes' (a
// NodePods is used only with its Node's pod CIDRs known: synced earlier,
// every other node's pods would be missing from the first policy sync).
// The CRD is not optional here: without it no other node's pod would be
// known, so the stream retries (logging the API server's answer) and the
// policy cube, never synced, keeps the agent not ready.
func (s *Source) runNodePodSources(ctx context.Context, c *client) []func() bool {
	claims := s.claims
	writer := &nodePodsWriter{c: c, node: s.NodeName, claims: claims}
	onNode := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", s.NodeName).String()
	}
	local := s.podStream(c, onNode, claims.setLocal, claims.localKeys)
	remote := &stream[[]*model.Pod]{
		streamOptions: s.streamOptions(),
		name:          "nodepods",
		api:           dynamicResource{c.dynamic.Resource(NodePodsResource)},
		convert: func(o runtime.Object) []*model.Pod {
			u := o.(*unstructured.Unstructured)
			obj := report.Object{Kind: "NodePods", Name: u.GetName()}
			var api k8s.NodePods
			err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), &api)
			if u.GetName() == s.NodeName {
				// This node's pods come from their Pod objects; its
				// NodePods is only checked against what was written.
				if err != nil {
					writer.observe(nil)
				} else {
					writer.observe(&api.Spec)
				}
				return []*model.Pod{} // present: deliver tells a deletion by nil
			}
			if err != nil {
				s.Report.SetErr(obj, report.InvalidField, fmt.Errorf("not a NodePods: %w", err))
				return []*model.Pod{} // none of its pods is used
			}
			pods, err := k8s.FromNodePods(&api)
			s.Report.SetErr(obj, report.InvalidField, err)
			if pods == nil {
				pods = []*model.Pod{}
			}
			return pods
		},
		deliver: func(k types.NamespacedName, pods []*model.Pod) {
			if k.Name == s.NodeName {
				if pods == nil {
					writer.observe(nil) // deleted (pods is never nil for one present)
				}
				return
			}
			claims.setNode(k.Name, pods)
		},
		forget: s.forget("NodePods"),
		known:  claims.nodes,
	}
	writer.synced = local.synced.Load
	go local.run(ctx)
	go remote.run(ctx)
	go writer.run(ctx)
	go func() {
		for !s.nodesSynced() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		claims.setNodesListed()
	}()
	return []func() bool{local.synced.Load, remote.synced.Load, s.nodesSynced}
}

// nodePodsWriter keeps this node's NodePods equal to its pods: applied
// (server-side apply, so a retry or another agent's restart converges)
// whenever they change, once the first list of them is complete (an
// earlier, partial object would withdraw pods from every other node's
// policy for a moment). The object is owned by the Node, so the API
// server's garbage collector deletes it with the Node.
type nodePodsWriter struct {
	c      *client
	node   string
	claims *podClaims
	synced func() bool

	mu      sync.Mutex
	nodeUID types.UID
	written *k8s.NodePodsSpec // nil: to be written
}

// observe is told of this node's NodePods as the API server has it (nil:
// deleted). Anything but what was last written (another writer's, a
// deleted object, the garbage collector's work after the Node was
// recreated) is written again, with the Node's UID read again.
func (w *nodePodsWriter) observe(spec *k8s.NodePodsSpec) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written == nil || (spec != nil && reflect.DeepEqual(*w.written, *spec)) {
		return
	}
	w.written = nil
	if spec == nil {
		w.nodeUID = ""
	}
	select {
	case w.claims.changed <- struct{}{}:
	default:
	}
}

func (w *nodePodsWriter) run(ctx context.Context) {
	for !w.synced() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	backoff := defaultBackoff
	for ctx.Err() == nil {
		if err := w.write(ctx); err != nil {
			d := backoff.Step()
			slog.Error("writing this node's NodePods failed, retrying", "node", w.node, "in", d, "err", err)
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			continue
		}
		backoff = defaultBackoff
		select {
		case <-w.claims.changed:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(nodePodsDebounce):
		case <-ctx.Done():
			return
		}
	}
}

// write applies this node's NodePods, if its pods changed since the last
// write.
func (w *nodePodsWriter) write(ctx context.Context) error {
	spec := k8s.ToNodePodsSpec(w.claims.localPods())
	w.mu.Lock()
	same, uid := w.written != nil && reflect.DeepEqual(*w.written, spec), w.nodeUID
	w.mu.Unlock()
	if same {
		return nil
	}
	if uid == "" {
		var node corev1.Node
		if err := w.c.core.Get().Resource("nodes").Name(w.node).Do(ctx).Into(&node); err != nil {
			return fmt.Errorf("get Node %s (the owner of its NodePods): %w", w.node, err)
		}
		uid = node.UID
	}
	obj := k8s.NodePods{
		TypeMeta: metav1.TypeMeta{APIVersion: k8s.NodePodsGroupVersion, Kind: "NodePods"},
		ObjectMeta: metav1.ObjectMeta{Name: w.node, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Node", Name: w.node, UID: uid}}},
		Spec: spec,
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return err
	}
	if _, err := w.c.dynamic.Resource(NodePodsResource).Apply(ctx, w.node, u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply NodePods %s: %w", w.node, err)
	}
	w.mu.Lock()
	w.written, w.nodeUID = &spec, uid
	w.mu.Unlock()
	slog.Debug("NodePods written", "node", w.node, "pods", len(spec.Pods))
	return nil
}
