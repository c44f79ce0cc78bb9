package kube

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"google.golang.org/protobuf/encoding/protowire"
)

// encodePage is list as the API server sends it in protobuf (its own
// serializer: the magic prefix, then runtime.Unknown around the list).
func encodePage(t *testing.T, list runtime.Object) []byte {
	t.Helper()
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := protobuf.NewSerializer(sch, sch).Encode(list, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func newService() protoObject { return &corev1.Service{} }

// closeCounter counts the closes of a response body.
type closeCounter struct{ closed int }

func (c *closeCounter) Close() error { c.closed++; return nil }

// readPage reads body as a page: its metadata, then every item, as the
// stream does; it returns what was handed on, the first error, and how
// often the body was closed.
func readPage(body []byte) (meta *pagedList, got []*corev1.Service, closes int, err error) {
	var c closeCounter
	page, err := newPagedList(bufio.NewReader(bytes.NewReader(body)), &c, newService, nil)
	if err != nil {
		return nil, nil, c.closed, err
	}
	err = page.each(func(o runtime.Object) error { got = append(got, o.(*corev1.Service)); return nil })
	return page, got, c.closed, err
}

// TestPagedList: a page's metadata is read at once, its items decoded in
// order as they are handed on, each into an object of its own.
func TestPagedList(t *testing.T) {
	list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page"}}
	for _, s := range []*corev1.Service{apiService("a", "10.96.0.1"), apiService("b", "10.96.0.2"), apiService("c", "fd00::3")} {
		list.Items = append(list.Items, *s)
	}
	page, got, closes, err := readPage(encodePage(t, list))
	if err != nil {
		t.Fatal(err)
	}
	if page.ResourceVersion != "42" || page.Continue != "next-page" {
		t.Errorf("list metadata: resourceVersion %q continue %q, want 42 and next-page", page.ResourceVersion, page.Continue)
	}
	if len(got) != len(list.Items) {
		t.Fatalf("%d items handed on, want %d", len(got), len(list.Items))
	}
	for i, s := range got {
		want := &list.Items[i]
		if s.Name != want.Name || s.Namespace != want.Namespace || s.Spec.ClusterIP != want.Spec.ClusterIP || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 {
			t.Errorf("item %d: %s/%s %s %v, want %s/%s %s port 80", i, s.Namespace, s.Name, s.Spec.ClusterIP, s.Spec.Ports, want.Namespace, want.Name, want.Spec.ClusterIP)
		}
		if i > 0 && s == got[i-1] {
			t.Errorf("items %d and %d handed on in one object", i-1, i)
		}
	}
	if closes != 1 {
		t.Errorf("the body was closed %d times once read, want once", closes)
	}

	empty, got, _, err := readPage(encodePage(t, &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}))
	if err != nil {
		t.Fatalf("an empty page: %v", err)
	}
	if empty.ResourceVersion != "7" || len(got) != 0 {
		t.Errorf("an empty page: resourceVersion %q, %d items; want 7, none", empty.ResourceVersion, len(got))
	}
}

// TestPagedListStreams: a page's metadata, then each item, is handed on as
// soon as its bytes arrive, not once the whole body has (which the agent
// would then hold in memory whole).
func TestPagedListStreams(t *testing.T) {
	list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page"}}
	for _, s := range []*corev1.Service{apiService("a", "10.96.0.1"), apiService("b", "10.96.0.2")} {
		list.Items = append(list.Items, *s)
	}
	body := encodePage(t, list)
	second := bytes.Index(body, []byte("10.96.0.2")) // inside the second item
	r, w := io.Pipe()
	go func() { _, _ = w.Write(body[:second]) }() // the second item's start, not its end
	opened := make(chan *pagedList, 1)
	go func() {
		page, err := newPagedList(bufio.NewReader(r), r, newService, nil)
		if err != nil {
			t.Error(err)
		}
		opened <- page
	}()
	var page *pagedList
	select {
	case page = <-opened:
	case <-time.After(10 * time.Second):
		_ = w.Close()
		t.Fatal("the metadata was not read before the body ended")
	}
	if page == nil {
		t.FailNow()
	}
	if page.Continue != "next-page" {
		t.Fatalf("metadata read before the body ended: continue %q, want next-page", page.Continue)
	}
	handed := make(chan string, 2)
	done := make(chan error, 1)
	go func() {
		done <- page.each(func(o runtime.Object) error { handed <- o.(*corev1.Service).Name; return nil })
	}()
	select {
	case name := <-handed:
		if name != "a" {
			t.Errorf("first item handed on: %s, want a", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first item was not handed on before the body ended")
	}
	_, _ = w.Write(body[second:])
	_ = w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if name := <-handed; name != "b" {
		t.Errorf("second item handed on: %s, want b", name)
	}
}

// TestPagedListRejects: a page that is not the API's plain protobuf is an
// error naming what is wrong, never a short list taken for a whole one.
func TestPagedListRejects(t *testing.T) {
	good := encodePage(t, &corev1.ServiceList{Items: []corev1.Service{*apiService("a", "10.96.0.1")}})
	if _, got, _, err := readPage(good); err != nil || len(got) != 1 {
		t.Fatalf("the well-formed page (positive control): %d items, %v", len(got), err)
	}
	gzipped := append(bytes.Clone(good), 0x1a, 4, 'g', 'z', 'i', 'p') // runtime.Unknown's contentEncoding (3)
	for _, c := range []struct {
		name, body, want string
	}{
		{"JSON", `{"kind":"ServiceList","items":[]}`, "magic prefix"},
		{"empty", "", "magic prefix"},
		{"truncated", string(good[:len(good)-5]), "malformed protobuf"},
		{"no list", string(protoMagic), "no list in the page"},
		{"compressed inside", string(gzipped), `content encoding "gzip"`},
		{"items before the metadata", string(itemFirst(t, good)), "list items before the list's metadata"},
	} {
		_, _, closes, err := readPage([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		if closes != 1 {
			t.Errorf("%s: the body was closed %d times, want once", c.name, closes)
		}
	}
	// An item that does not decode stops the list at it.
	bad := encodePage(t, &corev1.ServiceList{Items: []corev1.Service{*apiService("a", "10.96.0.1"), *apiService("b", "10.96.0.2")}})
	i := bytes.LastIndex(bad, []byte("10.96.0.2"))
	bad[i-1] = 0xff // the ClusterIP's length: past the item's end
	_, got, _, err := readPage(bad)
	if err == nil || !strings.Contains(err.Error(), "list item 1") || len(got) != 1 {
		t.Errorf("a page whose second item is corrupt: %d handed on, error %v; want 1 and an error naming list item 1", len(got), err)
	}
}

// itemFirst is page with its list's fields reordered: every item, then the
// metadata (the API server writes the metadata first).
func itemFirst(t *testing.T, page []byte) []byte {
	t.Helper()
	envelope := page[len(protoMagic):]
	var out []byte
	for len(envelope) > 0 {
		num, typ, n := protowire.ConsumeTag(envelope)
		if n < 0 || typ != protowire.BytesType {
			t.Fatalf("unexpected envelope field %d of type %d", num, typ)
		}
		v, m := protowire.ConsumeBytes(envelope[n:])
		envelope = envelope[n+m:]
		if num == unknownRaw {
			var meta, items []byte
			for len(v) > 0 {
				f, _, k := protowire.ConsumeTag(v)
				b, j := protowire.ConsumeBytes(v[k:])
				field := protowire.AppendBytes(protowire.AppendTag(nil, f, protowire.BytesType), b)
				if f == listMetadata {
					meta = append(meta, field...)
				} else {
					items = append(items, field...)
				}
				v = v[k+j:]
			}
			v = append(items, meta...)
		}
		out = protowire.AppendBytes(protowire.AppendTag(out, num, protowire.BytesType), v)
	}
	return append(bytes.Clone(protoMagic), out...)
}

// BenchmarkListPageDecode: one page of 2,000 Services as the API server
// sends it, decoded whole into a ServiceList (as before pagedList) or item
// by item; each object handed to a consumer that keeps nothing, as the
// source converts and drops it. Prints ns and bytes allocated per item.
func BenchmarkListPageDecode(b *testing.B) {
	const items = 2000
	list := &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: "1", Continue: "c"}}
	for i := range items {
		s := apiService("service-"+strings.Repeat("x", i%7), "10.96.0.1")
		s.Labels = map[string]string{"app": "a", "tier": "backend"}
		list.Items = append(list.Items, *s)
	}
	body := encodePage(&testing.T{}, list)
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		b.Fatal(err)
	}
	ser := protobuf.NewSerializer(sch, sch)
	keep := func(runtime.Object) error { return nil }
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			into := &corev1.ServiceList{}
			if _, _, err := ser.Decode(body, nil, into); err != nil {
				b.Fatal(err)
			}
			for i := range into.Items {
				_ = keep(&into.Items[i])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*items), "ns/item")
	})
	b.Run("paged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			page, err := newPagedList(bufio.NewReader(bytes.NewReader(body)), io.NopCloser(nil), newService, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := page.each(keep); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*items), "ns/item")
	})
}
