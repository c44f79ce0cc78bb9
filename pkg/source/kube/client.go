package kube

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// client lists and watches the resources the agent reads, through a
// scheme that knows only those. client-go's clientset registers every API
// group of Kubernetes when the program starts, which cost the agent about
// 10 MB of memory for types it never reads.
type client struct {
	core, discovery, networking *rest.RESTClient
	params                      runtime.ParameterCodec
	// decoder decodes a list the API server answered in other than
	// protobuf (JSON, YAML or protobuf, whichever it is).
	decoder runtime.Decoder
	// dynamic reads netcube's own resources (CRDs) as unstructured
	// objects, converted to their Go types on arrival.
	dynamic dynamic.Interface
}

// NewClient returns a client for the API server cfg points at.
func newClient(cfg *rest.Config) (*client, error) {
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, discoveryv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(sch); err != nil {
			return nil, err
		}
	}
	codecs := serializer.NewCodecFactory(sch)
	restFor := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath = &gv, apiPath
		c.NegotiatedSerializer = codecs.WithoutConversion()
		// Protobuf: a third of JSON's size, and decoded a page item by
		// item (pagedList). JSON only when cfg asks for it (the agent's
		// --api-content-type=json, to compare).
		if cfg.ContentType == runtime.ContentTypeJSON {
			c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
		} else {
			c.ContentType = runtime.ContentTypeProtobuf
			c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
		}
		return rest.RESTClientFor(c)
	}
	core, err := restFor(corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	discovery, err := restFor(discoveryv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	networking, err := restFor(networkingv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return &client{core: core, discovery: discovery, networking: networking, params: runtime.NewParameterCodec(sch),
		decoder: codecs.UniversalDeserializer(), dynamic: dyn}, nil
}

// resource is one resource's list and watch, with options applied to both
// (the label and field selectors).
type resource struct {
	c     *client
	rest  *rest.RESTClient
	name  string
	list  func() runtime.Object     // a new, empty list (a page not in protobuf is decoded into it)
	item  func() protoObject        // a new, empty item (a protobuf page's are decoded one at a time)
	tweak func(*metav1.ListOptions) // selectors; nil: every object
	// phases, if set, gets the time lists spend waiting for the API
	// server (its headers, then each item's bytes) and decoding.
	phases *listPhases
	// keep, if set, skips the items of a protobuf page whose encoding it
	// rejects, undecoded (pagedList.keep).
	keep func(encoded []byte) bool
}

func (r resource) options(o *metav1.ListOptions) {
	if r.tweak != nil {
		r.tweak(o)
	}
}

// List asks for one page. A protobuf page is read as it arrives (a
// pagedList): its items are decoded one at a time as they are handed on,
// so a page is never its whole body in memory, nor a slice of decoded
// objects grown by doubling as it decodes (which, with the garbage
// collector scanning it, was a fifth of the agent's CPU time listing
// 100,000 Services).
func (r resource) List(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	r.options(&o)
	start := time.Now()
	body, err := r.rest.Get().Resource(r.name).VersionedParams(&o, r.c.params).Stream(ctx)
	if err != nil {
		r.phases.since(phaseList, start)
		return nil, err
	}
	buffered := bufio.NewReaderSize(body, 64<<10)
	if magic, _ := buffered.Peek(len(protoMagic)); !bytes.Equal(magic, protoMagic) {
		// Not protobuf (asked for JSON, --api-content-type=json): read
		// and decode whole.
		defer body.Close()
		b, err := io.ReadAll(buffered)
		start = r.phases.since(phaseList, start)
		if err != nil {
			return nil, err
		}
		into := r.list()
		_, _, err = r.c.decoder.Decode(b, nil, into)
		r.phases.since(phaseDecode, start)
		if err != nil {
			return nil, fmt.Errorf("%s: list page: %w", r.name, err)
		}
		return into, nil
	}
	page, err := newPagedList(buffered, body, r.item, r.phases)
	r.phases.since(phaseList, start) // the headers and the list's metadata
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.name, err)
	}
	page.keep = r.keep
	return page, nil
}

func (r resource) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	r.options(&o)
	o.Watch = true
	return r.rest.Get().Resource(r.name).VersionedParams(&o, r.c.params).Watch(ctx)
}
