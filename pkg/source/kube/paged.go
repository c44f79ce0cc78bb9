package kube

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"google.golang.org/protobuf/encoding/protowire"
)

// protoObject is an API object that decodes itself from protobuf (every
// built-in type does).
type protoObject interface {
	runtime.Object
	Unmarshal([]byte) error
}

// pagedList is one page of a list in the API server's protobuf encoding,
// decoded lazily: its list metadata at once, each item only when each
// hands it on, into an object of its own that nothing else holds.
type pagedList struct {
	metav1.ListMeta
	items  [][]byte // each item's encoding, within the response body
	item   func() protoObject
	phases *listPhases
}

// protoMagic starts every protobuf-encoded API response
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the bytes that
// follow are a runtime.Unknown wrapping the object.
var protoMagic = []byte("k8s\x00")

// newPagedList reads a list page's envelope and metadata from body. The
// fields are the API's protobuf schema: runtime.Unknown's raw (2) and
// contentEncoding (3); every built-in list's metadata (1) and items (2).
func newPagedList(body []byte, item func() protoObject, phases *listPhases) (*pagedList, error) {
	if !bytes.HasPrefix(body, protoMagic) {
		return nil, errors.New("protobuf list page without the API's magic prefix")
	}
	var raw []byte
	err := eachField(body[len(protoMagic):], func(num protowire.Number, v []byte) error {
		switch num {
		case 2:
			raw = v
		case 3:
			if len(v) != 0 {
				return fmt.Errorf("list page in content encoding %q, not plain protobuf", v)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l := &pagedList{item: item, phases: phases}
	err = eachField(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			return l.ListMeta.Unmarshal(v)
		case 2:
			l.items = append(l.items, v)
		}
		return nil
	})
	return l, err
}

// eachField calls fn with the number and contents of each length-delimited
// field of the protobuf message b, skipping fields of other wire types.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("malformed protobuf list page: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return fmt.Errorf("malformed protobuf list page: %w", protowire.ParseError(m))
			}
			if err := fn(num, v); err != nil {
				return err
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return fmt.Errorf("malformed protobuf list page: %w", protowire.ParseError(m))
		}
		b = b[m:]
	}
	return nil
}

// each decodes the items in order, handing each to fn; it stops at the
// first error.
func (l *pagedList) each(fn func(runtime.Object) error) error {
	for i, b := range l.items {
		start := time.Now()
		obj := l.item()
		if err := obj.Unmarshal(b); err != nil {
			return fmt.Errorf("list item %d: %w", i, err)
		}
		l.phases.since(phaseDecode, start)
		if err := fn(obj); err != nil {
			return err
		}
	}
	return nil
}

func (l *pagedList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (l *pagedList) DeepCopyObject() runtime.Object {
	c := *l
	c.ListMeta = *l.ListMeta.DeepCopy()
	c.items = append([][]byte(nil), l.items...) // the encodings are read only
	return &c
}
