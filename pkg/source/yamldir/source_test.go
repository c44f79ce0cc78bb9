package yamldir

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netcube/netcube/pkg/model"
	"github.com/netcube/netcube/pkg/report"
	"github.com/netcube/netcube/pkg/source"
)

// recorder is a source.Handler keeping every event in order.
type recorder struct {
	mu     sync.Mutex
	events []string
	synced bool
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) OnService(k types.NamespacedName, s *model.Service) {
	if s == nil {
		r.add("delete Service " + k.String())
		return
	}
	r.add("Service " + k.String() + " " + s.ClusterIPs()[0].String())
}

func (r *recorder) OnEndpointSlice(k types.NamespacedName, s *model.EndpointSlice) {
	if s == nil {
		r.add("delete EndpointSlice " + k.String())
		return
	}
	r.add("EndpointSlice " + k.String())
}

func (r *recorder) OnSynced() { r.add("synced") }

// The directory source never lists again, so it never asks.
func (r *recorder) ServiceKeys() []types.NamespacedName       { return nil }
func (r *recorder) EndpointSliceKeys() []types.NamespacedName { return nil }

func (r *recorder) OnNode(name string, n *model.NodeInfo) {
	if n == nil {
		r.add("delete Node " + name)
		return
	}
	r.add(fmt.Sprintf("Node %s %v", name, n.PodCIDRs))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func svcYAML(name, ip string) string {
	return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + "}\nspec:\n  clusterIP: " + ip + "\n  ports: [{port: 80}]\n"
}

const sliceYAML = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: a-1, labels: {kubernetes.io/service-name: a}}
addressType: IPv4
endpoints: [{addresses: ["10.0.0.1"]}]
`

// sink passes every reported problem on as an error.
type sink chan error

func (s sink) Warn(obj report.Object, reason report.Reason, message string) {
	s <- fmt.Errorf("%s %s: %s", obj, reason, message)
}

type harness struct {
	t      *testing.T
	dir    string
	rec    *recorder
	errs   chan error
	cancel context.CancelFunc
}

func start(t *testing.T, files map[string]string) *harness {
	return startWith(t, files, func(r *recorder) source.Handler { return r })
}

// startPolicies starts a source whose handler enforces NetworkPolicy too.
func startPolicies(t *testing.T, files map[string]string) *harness {
	return startWith(t, files, func(r *recorder) source.Handler { return policyRecorder{r} })
}

func startWith(t *testing.T, files map[string]string, handler func(*recorder) source.Handler) *harness {
	h := &harness{t: t, dir: t.TempDir(), rec: &recorder{}, errs: make(chan error, 100)}
	for f, c := range files {
		h.write(f, c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	src := &Source{Dir: h.dir, Report: &report.Reporter{Sink: sink(h.errs)}}
	done := make(chan struct{})
	go func() { _ = src.Run(ctx, handler(h.rec)); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *harness) write(file, content string) {
	tmp := filepath.Join(h.dir, ".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.dir, file)); err != nil {
		h.t.Fatal(err)
	}
}

// expect waits for exactly these events (in any order) and no others.
func (h *harness) expect(want ...string) {
	h.t.Helper()
	var got []string
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && len(got) < len(want) {
		got = append(got, h.rec.take()...)
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(4 * settle) // anything extra would have arrived by now
	got = append(got, h.rec.take()...)
	if strings.Join(sorted(got), "\n") != strings.Join(sorted(want), "\n") {
		h.t.Fatalf("events:\n  got  %q\n  want %q", got, want)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func (h *harness) expectError(parts ...string) {
	h.t.Helper()
	select {
	case err := <-h.errs:
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				h.t.Fatalf("error %q does not mention %q", err, p)
			}
		}
	case <-time.After(2 * time.Second):
		h.t.Fatalf("no error reported (want one mentioning %q)", parts)
	}
}

func TestDeliversOnlyWhatChanged(t *testing.T) {
	h := start(t, map[string]string{"svc.yaml": svcYAML("a", "10.96.0.1") + "---\n" + svcYAML("b", "10.96.0.2") + "---\n" + sliceYAML})
	h.expect("Service default/a 10.96.0.1", "Service default/b 10.96.0.2", "EndpointSlice default/a-1", "synced")

	// Editing one object of a multi-document file delivers just that object.
	h.write("svc.yaml", svcYAML("a", "10.96.0.1")+"---\n"+svcYAML("b", "10.96.0.9")+"---\n"+sliceYAML)
	h.expect("Service default/b 10.96.0.9")

	// Dropping an object from a file deletes it; removing the file deletes the rest.
	h.write("svc.yaml", svcYAML("a", "10.96.0.1")+"---\n"+sliceYAML)
	h.expect("delete Service default/b")
	if err := os.Remove(filepath.Join(h.dir, "svc.yaml")); err != nil {
		t.Fatal(err)
	}
	h.expect("delete Service default/a", "delete EndpointSlice default/a-1")
}

func TestBadInputIsNamedAndLosesNothing(t *testing.T) {
	h := start(t, map[string]string{
		"good.yaml":  svcYAML("a", "10.96.0.1"),
		"mixed.yaml": svcYAML("b", "10.96.0.2") + "---\n" + svcYAML("c", "10.96.0.3"),
	})
	h.expect("Service default/a 10.96.0.1", "Service default/b 10.96.0.2", "Service default/c 10.96.0.3", "synced")

	// A file that does not parse: named, and its objects stay as they were.
	h.write("mixed.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: b\n")
	h.expectError("mixed.yaml", "keeping its previous objects")
	h.expect()

	// An invalid object: named with its file; the others in the file apply,
	// and the invalid one keeps its last valid version.
	h.write("mixed.yaml", svcYAML("b", "10.96.0.300")+"---\n"+svcYAML("c", "10.96.0.33"))
	h.expectError("mixed.yaml", "Service default/b", `"10.96.0.300" is not an IP address`)
	h.expect("Service default/c 10.96.0.33")

	// An unknown field is an error too (a typo must not be silently ignored).
	h.write("good.yaml", strings.Replace(svcYAML("a", "10.96.0.1"), "ports:", "portz:", 1))
	h.expectError("good.yaml", "Service default/a", "portz")
	h.expect()

	// A new file with an invalid object adds nothing but the error.
	h.write("new.yaml", "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: x}\naddressType: IPv5\n")
	h.expectError("new.yaml", "EndpointSlice default/x", "IPv5")
	h.expect()
}

// TestEverythingNotReadIsReported: a kind or apiVersion netcube does not
// read, and an EndpointSlice that names no Service, are reported, naming
// the file and document or the object; nothing is delivered for them.
func TestEverythingNotReadIsReported(t *testing.T) {
	h := start(t, map[string]string{"good.yaml": svcYAML("a", "10.96.0.1")})
	h.expect("Service default/a 10.96.0.1", "synced")
	h.write("other.yaml", svcYAML("a2", "10.96.0.2")+"---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n"+
		strings.Replace(svcYAML("b", "10.96.0.3"), "apiVersion: v1", "apiVersion: v2", 1))
	h.expectError("other.yaml", `document 2: kind "Deployment" apiVersion "apps/v1" is not read by netcube`,
		`document 3: kind "Service" apiVersion "v2"`)
	h.expect("Service default/a2 10.96.0.2") // the readable document still applies
	h.write("orphan.yaml", strings.Replace(sliceYAML, "labels: {kubernetes.io/service-name: a}", "labels: {}", 1))
	h.expectError("EndpointSlice default/a-1", "metadata.labels[kubernetes.io/service-name]: missing")
	h.expect()
}

// TestObjectInTwoFiles: the same object in two files is reported; the one in
// the file first by name applies whichever was written last, and when it is
// removed the other takes over (it is never silently deleted).
func TestObjectInTwoFiles(t *testing.T) {
	h := start(t, map[string]string{"b.yaml": svcYAML("a", "10.96.0.2")})
	h.expect("Service default/a 10.96.0.2", "synced")
	h.write("a.yaml", svcYAML("a", "10.96.0.1"))
	h.expectError("Service default/a DuplicateObject", "a.yaml and", "b.yaml", "the one in "+filepath.Join(h.dir, "a.yaml")+" (first by file name) applies")
	h.expect("Service default/a 10.96.0.1")
	h.write("b.yaml", svcYAML("a", "10.96.0.9")) // the losing copy changes: nothing applies
	h.expect()
	if err := os.Remove(filepath.Join(h.dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	h.expect("Service default/a 10.96.0.9") // handed over, not deleted
	if err := os.Remove(filepath.Join(h.dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	h.expect("delete Service default/a")
}

// TestInvalidSourceRangesFailClosed: an edit whose loadBalancerSourceRanges
// cannot be read does not keep the previous (open) version, as other
// invalid edits do: it applies with no client allowed.
func TestInvalidSourceRangesFailClosed(t *testing.T) {
	lb := func(ranges string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: lb}\nspec:\n  type: LoadBalancer\n  clusterIP: 10.96.0.5\n" +
			"  loadBalancerSourceRanges: [" + ranges + "]\n  ports: [{port: 80, nodePort: 30080}]\nstatus: {loadBalancer: {ingress: [{ip: 192.0.2.5}]}}\n"
	}
	rec := &rangeRecorder{recorder: &recorder{}}
	h := &harness{t: t, dir: t.TempDir(), rec: rec.recorder, errs: make(chan error, 100)}
	h.write("lb.yaml", lb("10.0.0.0/8"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = (&Source{Dir: h.dir, Report: &report.Reporter{Sink: sink(h.errs)}}).Run(ctx, rec)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	h.expect("Service default/lb 10.96.0.5 ranges [10.0.0.0/8]", "synced")
	h.write("lb.yaml", lb("10.0.0.0/8, 10.0.0.0/33"))
	h.expectError("Service default/lb", `spec.loadBalancerSourceRanges[1]: "10.0.0.0/33"`, "applied with access restricted")
	h.expect("Service default/lb 10.96.0.5 walled")
}

// rangeRecorder records a Service's source ranges too.
type rangeRecorder struct{ *recorder }

func (r *rangeRecorder) OnService(k types.NamespacedName, s *model.Service) {
	if s == nil || s.External == nil {
		r.recorder.OnService(k, s)
		return
	}
	if s.External.Walled {
		r.add("Service " + k.String() + " " + s.ClusterIPs()[0].String() + " walled")
		return
	}
	r.add(fmt.Sprintf("Service %s %s ranges %v", k, s.ClusterIPs()[0], s.External.SourceRanges))
}

// TestNodesCarryPodCIDRs: Node documents give the nodes' pod CIDRs (the
// CNI plugin's ranges, and routes to other nodes); an invalid CIDR is
// named and the node keeps its last valid version.
func TestNodesCarryPodCIDRs(t *testing.T) {
	node := func(cidrs string) string {
		return "apiVersion: v1\nkind: Node\nmetadata: {name: node1}\nspec:\n  podCIDRs: " + cidrs + "\n"
	}
	h := start(t, map[string]string{"nodes.yaml": node(`["10.244.1.0/24", "fd00:10:244:1::/64"]`)})
	h.expect("Node node1 [10.244.1.0/24 fd00:10:244:1::/64]", "synced")
	h.write("nodes.yaml", node(`["10.244.1.0/24", "10.244.9.0/24"]`))
	h.expectError("Node node1", "spec.podCIDRs[1]: 10.244.9.0/24 is a second CIDR of its family")
	h.expect() // the last valid version stays
	h.write("nodes.yaml", node(`["10.244.2.0/24"]`))
	h.expect("Node node1 [10.244.2.0/24]")
	if err := os.Remove(filepath.Join(h.dir, "nodes.yaml")); err != nil {
		t.Fatal(err)
	}
	h.expect("delete Node node1")
}
