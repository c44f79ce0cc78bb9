package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// TestListOverHTTP: a list page through the REST client, as the API server
// answers it: in protobuf, read as it arrives (a pagedList), or in JSON
// (--api-content-type=json), decoded whole; either way the page's
// metadata and items, and the page size asked for.
func TestListOverHTTP(t *testing.T) {
	list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "5", Continue: "more"}}
	list.Items = []corev1.Service{*apiService("a", "10.96.0.1"), *apiService("b", "10.96.0.2")}
	protoBody := encodePage(t, list)
	const jsonBody = `{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"5","continue":"more"},"items":[` +
		`{"metadata":{"name":"a","namespace":"ns"},"spec":{"clusterIP":"10.96.0.1"}},{"metadata":{"name":"b","namespace":"ns"},"spec":{"clusterIP":"10.96.0.2"}}]}`
	for _, c := range []struct {
		name, contentType string
		paged             bool // read as it arrives
	}{
		{"protobuf", runtime.ContentTypeProtobuf, true},
		{"json", runtime.ContentTypeJSON, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var limit string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				limit = r.URL.Query().Get("limit")
				if c.paged {
					w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
					_, _ = w.Write(protoBody)
					return
				}
				w.Header().Set("Content-Type", runtime.ContentTypeJSON)
				fmt.Fprint(w, jsonBody)
			}))
			defer srv.Close()
			cl, err := newClient(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: c.contentType}})
			if err != nil {
				t.Fatal(err)
			}
			r := resource{c: cl, rest: cl.core, name: "services", list: func() runtime.Object { return &corev1.ServiceList{} }, item: newService}
			page, err := r.List(context.Background(), metav1.ListOptions{Limit: 7})
			if err != nil {
				t.Fatal(err)
			}
			if limit != "7" {
				t.Errorf("asked for limit %q, want 7", limit)
			}
			var names []string
			put := func(o runtime.Object) error { names = append(names, o.(*corev1.Service).Name); return nil }
			var meta metav1.ListMeta
			switch p := page.(type) {
			case *pagedList:
				if !c.paged {
					t.Fatal("a JSON page read as protobuf")
				}
				meta = p.ListMeta
				err = p.each(put)
			case *corev1.ServiceList:
				if c.paged {
					t.Fatal("a protobuf page decoded whole, not read as it arrives")
				}
				meta = p.ListMeta
				for i := range p.Items {
					_ = put(&p.Items[i])
				}
			default:
				t.Fatalf("page of type %T", page)
			}
			if err != nil {
				t.Fatal(err)
			}
			if meta.ResourceVersion != "5" || meta.Continue != "more" || fmt.Sprint(names) != "[a b]" {
				t.Errorf("page: resourceVersion %q continue %q items %v; want 5, more, [a b]", meta.ResourceVersion, meta.Continue, names)
			}
		})
	}
}

// TestListExpired: an expired continue token (410 Gone, reason Expired)
// comes back as the API error the stream relists on, not as a page; the
// same server's first page, before it, is a page.
func TestListExpired(t *testing.T) {
	first := encodePage(t, &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "5", Continue: "old"},
		Items: []corev1.Service{*apiService("a", "10.96.0.1")}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("continue") == "" {
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			_, _ = w.Write(first)
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		w.WriteHeader(http.StatusGone)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","message":"too old","code":410}`)
	}))
	defer srv.Close()
	cl, err := newClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	r := resource{c: cl, rest: cl.core, name: "services", list: func() runtime.Object { return &corev1.ServiceList{} }, item: newService}
	page, err := r.List(context.Background(), metav1.ListOptions{Limit: 7})
	if err != nil {
		t.Fatalf("the first page (positive control): %v", err)
	}
	p, ok := page.(*pagedList)
	if !ok || p.Continue != "old" {
		t.Fatalf("the first page (positive control): %T %+v, want a page continuing at old", page, page)
	}
	if err := p.each(func(runtime.Object) error { return nil }); err != nil {
		t.Fatalf("the first page's items: %v", err)
	}
	page, err = r.List(context.Background(), metav1.ListOptions{Limit: 7, Continue: p.Continue})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("an expired continue token: page %v, error %v; want the API's Expired error", page, err)
	}
}
