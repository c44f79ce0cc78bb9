package source

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
)

// log is a Handler that records what it is handed, in order.
type log struct {
	mu   sync.Mutex
	got  []string
	keys []types.NamespacedName
}

func (l *log) add(s string) { l.mu.Lock(); l.got = append(l.got, s); l.mu.Unlock() }

func (l *log) OnService(k types.NamespacedName, s *model.Service) {
	l.add(fmt.Sprintf("service %s %d", k.Name, s.Created))
}
func (l *log) OnEndpointSlice(k types.NamespacedName, _ *model.EndpointSlice) {
	l.add("slice " + k.Name)
}
func (l *log) OnNode(name string, _ *model.NodeInfo)        { l.add("node " + name) }
func (l *log) OnSynced()                                    { l.add("synced") }
func (l *log) ServiceKeys() []types.NamespacedName          { return l.keys }
func (l *log) EndpointSliceKeys() []types.NamespacedName    { return nil }
func (l *log) snapshot() []string                           { l.mu.Lock(); defer l.mu.Unlock(); return slices.Clone(l.got) }
func svc(gen int64) *model.Service                          { return &model.Service{Created: gen} }
func key(name string) types.NamespacedName                  { return types.NamespacedName{Namespace: "ns", Name: name} }
func (l *log) OnPod(k types.NamespacedName, _ *model.Pod)   { l.add("pod " + k.Name) }
func (l *log) OnNamespace(string, *model.Namespace)         {}
func (l *log) OnPolicy(types.NamespacedName, *model.Policy) {}
func (l *log) OnPoliciesSynced()                            { l.add("policies synced") }
func (l *log) PodKeys() []types.NamespacedName              { return nil }
func (l *log) NamespaceKeys() []types.NamespacedName        { return nil }
func (l *log) PolicyKeys() []types.NamespacedName           { return nil }

// TestDeferredKeepsOrder: what a source hands on before Attach reaches the
// handler on Attach, in order, and nothing handed on while Attach replays
// overtakes it (the last version of an object is the one kept).
func TestDeferredKeepsOrder(t *testing.T) {
	var d Deferred
	for gen := range int64(3) {
		d.OnService(key("a"), svc(gen))
	}
	d.OnNode("n1", nil)
	d.OnPod(key("p"), nil)
	d.OnSynced()
	l := &log{}
	// A source goroutine goes on handing changes on while Attach runs.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for gen := int64(3); gen < 200; gen++ {
			d.OnService(key("a"), svc(gen))
		}
	}()
	d.Attach(l)
	wg.Wait()
	got := l.snapshot()
	want := []string{"service a 0", "service a 1", "service a 2"}
	if !slices.Equal(got[:3], want) {
		t.Fatalf("first changes handed on: %v, want %v", got[:3], want)
	}
	last := -1
	for _, s := range got {
		var gen int
		if _, err := fmt.Sscanf(s, "service a %d", &gen); err == nil {
			if gen != last+1 {
				t.Fatalf("service a's version %d handed on after %d: out of order (%v)", gen, last, got)
			}
			last = gen
		}
	}
	if last != 199 {
		t.Errorf("the last version handed on is %d, want 199", last)
	}
	for _, w := range []string{"node n1", "pod p", "synced"} {
		if !slices.Contains(got, w) {
			t.Errorf("%q not handed on (got %v)", w, got)
		}
	}
}

// TestDeferredKeysWaitForAttach: a relist's question (what does the
// handler hold?) is answered by the real handler, once there is one.
func TestDeferredKeysWaitForAttach(t *testing.T) {
	// Positive control: once attached, the question is answered at once.
	var attached Deferred
	attached.Attach(&log{keys: []types.NamespacedName{key("b")}})
	if got := attached.ServiceKeys(); !slices.Equal(got, []types.NamespacedName{key("b")}) {
		t.Fatalf("ServiceKeys of an attached Deferred: %v, want [ns/b]", got)
	}
	var d Deferred
	answer := make(chan []types.NamespacedName, 1)
	go func() { answer <- d.ServiceKeys() }()
	select {
	case got := <-answer:
		t.Fatalf("answered %v before Attach", got)
	case <-time.After(50 * time.Millisecond):
	}
	d.Attach(&log{keys: []types.NamespacedName{key("a")}})
	select {
	case got := <-answer:
		if !slices.Equal(got, []types.NamespacedName{key("a")}) {
			t.Errorf("ServiceKeys after Attach: %v, want [ns/a]", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServiceKeys still waiting after Attach")
	}
}

// TestDeferredDropsWhatTheHandlerDoesNotTake: pod changes go to a handler
// that enforces policy (positive control), and nowhere for one that does not.
func TestDeferredDropsWhatTheHandlerDoesNotTake(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       func(*log) Handler
		wantPod bool
	}{
		{"policy handler", func(l *log) Handler { return l }, true},
		{"services only", func(l *log) Handler { return servicesOnly{l} }, false},
	} {
		var d Deferred
		d.OnPod(key("p"), nil)
		d.OnService(key("a"), svc(0))
		l := &log{}
		d.Attach(c.h(l))
		d.OnPod(key("q"), nil)
		got := l.snapshot()
		if !slices.Contains(got, "service a 0") {
			t.Errorf("%s: the Service not handed on: %v", c.name, got)
		}
		if has := slices.Contains(got, "pod p") && slices.Contains(got, "pod q"); has != c.wantPod {
			t.Errorf("%s: pods handed on %v, want %v (got %v)", c.name, has, c.wantPod, got)
		}
	}
}

// servicesOnly hides log's PolicyHandler methods.
type servicesOnly struct{ l *log }

func (s servicesOnly) OnService(k types.NamespacedName, v *model.Service) { s.l.OnService(k, v) }
func (s servicesOnly) OnEndpointSlice(k types.NamespacedName, v *model.EndpointSlice) {
	s.l.OnEndpointSlice(k, v)
}
func (s servicesOnly) OnNode(n string, v *model.NodeInfo)        { s.l.OnNode(n, v) }
func (s servicesOnly) OnSynced()                                 { s.l.OnSynced() }
func (s servicesOnly) ServiceKeys() []types.NamespacedName       { return nil }
func (s servicesOnly) EndpointSliceKeys() []types.NamespacedName { return nil }
