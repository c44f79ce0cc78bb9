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
	{Group: "", Resource: "services"}:                       "/registry/services/specs/",
	{Group: "discovery.k8s.io", Resource: "endpointslices"}: "/registry/endpointslices/",
	{Group: "networking.k8s.io", Resource: "ipaddresses"}:   "/registry/ipaddresses/",
	{Group: "", Resource: "namespaces"}:                     "/registry/namespaces/",
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
// nothing here runs validation, defaulting or admission.
func (e *Env) StoreDirect(ctx context.Context, objs []StoredObject) error {
	if e.EtcdURL == "" {
		return errors.New("StoreDirect needs a control plane started by this process")
	}
	httpc := &http.Client{}
	if e.Netns != "" {
		httpc.Transport = &http.Transport{DialContext: NetnsDialer(e.Netns)}
	}
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
		body, _ := json.Marshal(map[string]any{"success": ops})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.EtcdURL+"/v3/kv/txn", bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return fmt.Errorf("etcd txn: %w", err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd txn: %s: %s", resp.Status, msg)
		}
	}
	return nil
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
