package kubeenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/scheme"
)

// storagePrefix is where kube-apiserver keeps a resource in etcd (its
// default layout; Services are the one special case used here).
var storagePrefix = map[schema.GroupResource]string{
	{Group: "", Resource: "services"}:                         "/registry/services/specs/",
	{Group: "discovery.k8s.io", Resource: "endpointslices"}:   "/registry/endpointslices/",
	{Group: "networking.k8s.io", Resource: "ipaddresses"}:     "/registry/ipaddresses/",
	{Group: "", Resource: "namespaces"}:                       "/registry/namespaces/",
	{Group: "networking.k8s.io", Resource: "networkpolicies"}: "/registry/networkpolicies/",
	{Group: "", Resource: "pods"}:                             "/registry/pods/",
}

// StoredObject is an object to bulk-load, with its resource.
type StoredObject struct {
	Resource schema.GroupResource
	Version  schema.GroupVersion // storage version
	Object   runtime.Object      // with ObjectMeta name (and namespace)
}

// StoreDirect writes objects straight into etcd, encoded exactly as
// kube-apiserver stores them; the API server's watch cache picks them up
// like any other write. It exists for benchmarks that need 100,000
// Services: kube-apiserver v1.36 does O(number of Services) work per
// Service create (ipallocator.Allocator.Used lists every IPAddress), so
// creating them through the API takes hours. The caller owns validity:
// nothing here runs validation, defaulting or admission. Objects written
// in one call share etcd revisions (128 to a transaction): a watcher the
// API server drops mid-way (a flood overruns its buffer) resumes after
// the last revision it saw and misses the rest of that one; store one
// object per call where a watching client must see every one.
func (e *Env) StoreDirect(ctx context.Context, objs []StoredObject) error {
	const perTxn = 128 // etcd's default --max-txn-ops
	for start := 0; start < len(objs); start += perTxn {
		var ops []map[string]any
		for _, o := range objs[start:min(start+perTxn, len(objs))] {
			key, val, err := encodeForStorage(o)
			if err != nil {
				return err
			}
			ops = append(ops, map[string]any{"requestPut": map[string]string{
				"key": base64.StdEncoding.EncodeToString([]byte(key)), "value": base64.StdEncoding.EncodeToString(val)}})
		}
		if _, err := e.etcdCall(ctx, "kv/txn", map[string]any{"success": ops}); err != nil {
			return err
		}
	}
	return nil
}

// DeleteDirect deletes an object straight from etcd (as a watch would see
// it deleted while it was not watching).
func (e *Env) DeleteDirect(ctx context.Context, resource schema.GroupResource, namespace, name string) error {
	prefix, ok := storagePrefix[resource]
	if !ok {
		return fmt.Errorf("no storage layout known for %s", resource)
	}
	key := prefix + namespace + "/" + name
	resp, err := e.etcdCall(ctx, "kv/deleterange", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	if err != nil {
		return err
	}
	if resp["deleted"] == nil {
		return fmt.Errorf("etcd: no key %s", key)
	}
	return nil
}

// Compact compacts etcd's history up to now: a watch from an older
// resource version can no longer resume and must list again.
func (e *Env) Compact(ctx context.Context) error {
	resp, err := e.etcdCall(ctx, "kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/registry/"))})
	if err != nil {
		return err
	}
	header, _ := resp["header"].(map[string]any)
	rev, _ := header["revision"].(string)
	if rev == "" {
		return fmt.Errorf("etcd: no revision in %v", resp)
	}
	_, err = e.etcdCall(ctx, "kv/compaction", map[string]any{"revision": rev, "physical": true})
	return err
}

// etcdCall calls etcd's JSON gateway (/v3/<path>).
func (e *Env) etcdCall(ctx context.Context, path string, body any) (map[string]any, error) {
	if e.EtcdURL == "" {
		return nil, errors.New("writing to etcd needs a control plane started by this process")
	}
	httpc := &http.Client{}
	if e.Netns != "" {
		httpc.Transport = &http.Transport{DialContext: NetnsDialer(e.Netns)}
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.EtcdURL+"/v3/"+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", path, err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd %s: %s: %s", path, resp.Status, msg)
	}
	var out map[string]any
	if err := json.Unmarshal(msg, &out); err != nil {
		return nil, fmt.Errorf("etcd %s: %w", path, err)
	}
	return out, nil
}

func encodeForStorage(o StoredObject) (string, []byte, error) {
	prefix, ok := storagePrefix[o.Resource]
	if !ok {
		return "", nil, fmt.Errorf("no storage layout known for %s", o.Resource)
	}
	m, err := metaOf(o.Object)
	if err != nil {
		return "", nil, err
	}
	// What the API server sets on create.
	if m.GetUID() == "" {
		m.SetUID(types.UID(uuid.NewUUID()))
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(metav1.Now())
	}
	m.SetResourceVersion("") // etcd's revision is the resource version
	key := prefix + m.GetName()
	if ns := m.GetNamespace(); ns != "" {
		key = prefix + ns + "/" + m.GetName()
	}
	enc := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), o.Version)
	var buf bytes.Buffer
	if err := enc.Encode(o.Object, &buf); err != nil {
		return "", nil, fmt.Errorf("encode %s: %w", key, err)
	}
	return key, buf.Bytes(), nil
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no ObjectMeta", obj)
	}
	return m, nil
}
