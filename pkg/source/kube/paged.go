package kube

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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
// read from the response body as it arrives: its list metadata at once
// (the API server writes it before the items), then each item only when
// it is handed on, decoded into an object of its own that nothing else
// holds. The page is never held whole: the agent keeps one item's bytes
// at a time, so a page of 10,000 EndpointSlices costs it a buffer, not
// the 3 MB body (and the doubling growth of reading it into one).
type pagedList struct {
	metav1.ListMeta
	body   *bufio.Reader
	closer io.Closer
	pos    int // bytes read from body
	// listEnd is where the list message (runtime.Unknown's raw) ends.
	listEnd int
	buf     []byte // the item being decoded; reused
	item    func() protoObject
	// keep, if set, is asked about each item's encoding first: an item
	// it rejects is skipped, never decoded.
	keep   func(encoded []byte) bool
	phases *listPhases
}

// protoMagic starts every protobuf-encoded API response
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the bytes that
// follow are a runtime.Unknown wrapping the object.
var protoMagic = []byte("k8s\x00")

// maxFieldBytes bounds one field (an item: an object is at most the 1.5
// MiB etcd stores); a length beyond it is a corrupt page, not an
// allocation.
const maxFieldBytes = 64 << 20

// The fields read, from the API's protobuf schema: runtime.Unknown's raw
// (2) and contentEncoding (3); every built-in list's metadata (1) and
// items (2).
const (
	unknownRaw             protowire.Number = 2
	unknownContentEncoding protowire.Number = 3
	listMetadata           protowire.Number = 1
	listItems              protowire.Number = 2
)

// errNotProtobuf: the body does not start with protoMagic.
var errNotProtobuf = errors.New("protobuf list page without the API's magic prefix")

// newPagedList reads a list page's envelope and metadata from body (a
// response body, read through buffered), which the page then owns: each
// closes it, and so does an error here.
func newPagedList(buffered *bufio.Reader, body io.Closer, item func() protoObject, phases *listPhases) (l *pagedList, err error) {
	l = &pagedList{body: buffered, closer: body, item: item, phases: phases}
	defer func() {
		if err != nil {
			body.Close()
		}
	}()
	magic, err := l.read(len(protoMagic))
	if err != nil || string(magic) != string(protoMagic) {
		return nil, errNotProtobuf
	}
	// The envelope up to its raw field (typeMeta, 1, comes first).
	for {
		num, typ, size, err := l.next()
		if err == io.EOF {
			return nil, malformed(errors.New("no list in the page"))
		}
		if err != nil {
			return nil, err
		}
		if num == unknownRaw && typ == protowire.BytesType {
			l.listEnd = l.pos + size
			break
		}
		if err := l.skip(typ, size); err != nil {
			return nil, err
		}
	}
	// The list up to its metadata.
	for l.pos < l.listEnd {
		num, typ, size, err := l.nextInList()
		if err != nil {
			return nil, err
		}
		if typ != protowire.BytesType || (num != listMetadata && num != listItems) {
			if err := l.skip(typ, size); err != nil {
				return nil, err
			}
			continue
		}
		b, err := l.read(size)
		if err != nil {
			return nil, err
		}
		if num == listItems {
			// kube-apiserver writes a list's fields in order, metadata
			// first; the page is read as it arrives, so an item cannot
			// wait for the continue token behind it.
			return nil, malformed(errors.New("list items before the list's metadata"))
		}
		if err := l.ListMeta.Unmarshal(b); err != nil {
			return nil, fmt.Errorf("list metadata: %w", err)
		}
		return l, nil
	}
	return l, nil // an empty list message: no metadata, no items
}

// each decodes the items in order, handing each to fn; it stops at the
// first error, and closes the body.
func (l *pagedList) each(fn func(runtime.Object) error) error {
	defer l.closer.Close()
	for i := 0; l.pos < l.listEnd; {
		start := time.Now()
		num, typ, size, err := l.nextInList()
		if err != nil {
			return err
		}
		if typ != protowire.BytesType || num != listItems {
			if err := l.skip(typ, size); err != nil {
				return err
			}
			continue
		}
		b, err := l.read(size)
		if err != nil {
			return err
		}
		start = l.phases.since(phaseList, start) // reading the body: waiting for the API server
		if l.keep != nil && !l.keep(b) {
			i++
			continue
		}
		obj := l.item()
		if err := obj.Unmarshal(b); err != nil {
			return fmt.Errorf("list item %d: %w", i, err)
		}
		l.phases.since(phaseDecode, start)
		i++
		if err := fn(obj); err != nil {
			return err
		}
	}
	return l.trailer()
}

// trailer reads the envelope after the list: a content encoding there
// means the list was not plain protobuf.
func (l *pagedList) trailer() error {
	for {
		num, typ, size, err := l.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if num != unknownContentEncoding || typ != protowire.BytesType {
			if err := l.skip(typ, size); err != nil {
				return err
			}
			continue
		}
		v, err := l.read(size)
		if err != nil {
			return err
		}
		if len(v) != 0 {
			return fmt.Errorf("list page in content encoding %q, not plain protobuf", v)
		}
	}
}

// next reads a field's tag and, for a length-delimited field, its length
// (size); io.EOF at the end of the body, between two fields.
func (l *pagedList) next() (num protowire.Number, typ protowire.Type, size int, err error) {
	tag, err := l.uvarint()
	if err == io.EOF {
		return 0, 0, 0, io.EOF
	}
	if err != nil {
		return 0, 0, 0, malformed(err)
	}
	num, typ = protowire.DecodeTag(tag)
	if num < protowire.MinValidNumber {
		return 0, 0, 0, malformed(errors.New("invalid field number"))
	}
	if typ == protowire.BytesType {
		n, err := l.uvarint()
		if err != nil {
			return 0, 0, 0, malformed(noEOF(err))
		}
		if n > maxFieldBytes {
			return 0, 0, 0, malformed(fmt.Errorf("a field of %d bytes", n))
		}
		size = int(n)
	}
	return num, typ, size, nil
}

// nextInList is next within the list message: its end is not the body's,
// and no field may cross it.
func (l *pagedList) nextInList() (protowire.Number, protowire.Type, int, error) {
	num, typ, size, err := l.next()
	if err == io.EOF {
		err = malformed(io.ErrUnexpectedEOF)
	}
	if err != nil {
		return 0, 0, 0, err
	}
	if l.pos+size > l.listEnd {
		return 0, 0, 0, malformed(errors.New("a field past the list's end"))
	}
	return num, typ, size, nil
}

// read reads the next n bytes into the page's buffer (valid until the
// next read).
func (l *pagedList) read(n int) ([]byte, error) {
	if cap(l.buf) < n {
		l.buf = make([]byte, n)
	}
	b := l.buf[:n]
	got, err := io.ReadFull(l.body, b)
	l.pos += got
	if err != nil {
		return nil, malformed(noEOF(err))
	}
	return b, nil
}

// skip passes over a field's value of type typ (size: a length-delimited
// one's).
func (l *pagedList) skip(typ protowire.Type, size int) error {
	switch typ {
	case protowire.BytesType:
	case protowire.VarintType:
		_, err := l.uvarint()
		return malformed(noEOF(err))
	case protowire.Fixed32Type:
		size = 4
	case protowire.Fixed64Type:
		size = 8
	default:
		return malformed(fmt.Errorf("field of wire type %d", typ))
	}
	n, err := l.body.Discard(size)
	l.pos += n
	return malformed(noEOF(err))
}

func (l *pagedList) uvarint() (uint64, error) {
	var x uint64
	for i := 0; ; i++ {
		c, err := l.body.ReadByte()
		if err != nil {
			if i > 0 {
				return 0, noEOF(err)
			}
			return 0, err
		}
		l.pos++
		if i == 9 && c > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return x, nil
		}
	}
}

// noEOF: the body ended inside something, not between two fields.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// malformed wraps err (nil: nil) as a corrupt or cut-short page.
func malformed(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("malformed protobuf list page: %w", err)
}

func (l *pagedList) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject is not possible for a page read as it arrives: its items
// are in a response body that can be read once. Nothing copies a page.
func (l *pagedList) DeepCopyObject() runtime.Object {
	panic("kube: a list page read from the API server as it arrives cannot be copied")
}
