package controlplane

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netcube/netcube/internal/testenv"
	"github.com/netcube/netcube/lab/faultrec"
	"github.com/netcube/netcube/lab/kubeenv"
	"github.com/netcube/netcube/pkg/model"
)

// hostileNS keeps the test's objects apart from the other tests'.
const hostileNS = "hostile"

func hostileService(name, clusterIP string, created time.Time, ports ...corev1.ServicePort) *corev1.Service {
	return serviceIn(hostileNS, name, clusterIP, created, ports...)
}

func serviceIn(ns, name, clusterIP string, created time.Time, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP, ClusterIPs: []string{clusterIP}, Type: corev1.ServiceTypeClusterIP,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: ptr(corev1.IPFamilyPolicySingleStack),
			SessionAffinity: corev1.ServiceAffinityNone, Ports: ports},
	}
}

func hostileSlice(name, service string, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	return sliceIn(hostileNS, name, service, port, addrs...)
}

func sliceIn(ns, name, service string, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	s := slice(ns, service, name, false, ready(addrs...))
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}}
	return s
}

// TestHostileInput: 1,000 malformed objects, stored past the API
// server's validation among 200 valid Services (a bad cluster IP, a port
// out of range, an unknown protocol, a ClusterIP another Service already
// has, an endpoint address that is not one, a slice port out of range, a
// slice naming no Service, an ICMP port, a Service with 2,000 ports of
// which the last 386 are out of range), and one valid Service with 10,000
// endpoints. Every valid Service is programmed with its backends, the big
// one whole, and the valid ports of the huge one; each
// malformed object is counted (netcube_config_problems) and an Event
// names one of each kind; the agent's memory stays bounded.
func TestHostileInput(t *testing.T) {
	a := startAgent(t, pinDir(t))
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hostileNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	later := now.Add(time.Hour) // the duplicates are the newer Services
	var objs []kubeenv.StoredObject
	svcs := func(s *corev1.Service) {
		objs = append(objs, kubeenv.StoredObject{Resource: corev1.Resource("services"), Version: corev1.SchemeGroupVersion, Object: s})
	}
	slices := func(s *discoveryv1.EndpointSlice) {
		objs = append(objs, kubeenv.StoredObject{Resource: discoveryv1.Resource("endpointslices"), Version: discoveryv1.SchemeGroupVersion, Object: s})
	}
	validIP := func(i int) string { return fmt.Sprintf("10.98.%d.%d", i/250, i%250+1) }
	backend := func(i int) string { return fmt.Sprintf("10.244.50.%d", i%250+1) }
	const valid = 200
	for i := range valid {
		svcs(hostileService(fmt.Sprintf("v%d", i), validIP(i), now))
		slices(hostileSlice(fmt.Sprintf("v%d-1", i), fmt.Sprintf("v%d", i), 8080, backend(i)))
	}
	invalid, conflicts := 0, 0
	for i := range 1000 {
		name := fmt.Sprintf("bad%d", i)
		switch i % 8 {
		case 0:
			svcs(hostileService(name, fmt.Sprintf("10.99.%d.300", i), now))
		case 1:
			svcs(hostileService(name, fmt.Sprintf("10.99.%d.1", i), now, corev1.ServicePort{Port: 70000, Protocol: corev1.ProtocolTCP}))
		case 2:
			svcs(hostileService(name, fmt.Sprintf("10.99.%d.2", i), now, corev1.ServicePort{Port: 80, Protocol: "FOO"}))
		case 3: // claims a valid Service's frontend, and is newer: loses it
			svcs(hostileService(name, validIP(i%valid), later))
			conflicts++
			continue
		case 4: // a second slice of a valid Service, its address not one
			slices(hostileSlice(name, fmt.Sprintf("v%d", i%valid), 8080, "10.244.50.999"))
		case 5:
			slices(hostileSlice(name, "ghost", 70000, backend(i)))
		case 6:
			s := hostileSlice(name, "ghost", 8080, backend(i))
			delete(s.Labels, discoveryv1.LabelServiceName)
			slices(s)
		case 7:
			if i != 7 {
				svcs(hostileService(name, fmt.Sprintf("10.99.%d.7", i), now, corev1.ServicePort{Port: 80, Protocol: "ICMP"}))
				break
			}
			// A huge port list: 2,000 ports, the last 386 out of range.
			var ports []corev1.ServicePort
			for p := range 2000 {
				ports = append(ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: int32(1000 + p*40), Protocol: corev1.ProtocolTCP})
			}
			svcs(hostileService(name, "10.99.7.7", now, ports...))
		}
		invalid++
	}
	// The big one: 10 slices of 1,000 endpoints.
	svcs(hostileService("big", "10.98.200.1", now))
	for s := range 10 {
		var addrs []string
		for e := range 1000 {
			n := s*1000 + e
			addrs = append(addrs, fmt.Sprintf("10.245.%d.%d", n/250, n%250+1))
		}
		slices(hostileSlice(fmt.Sprintf("big-%d", s), "big", 8080, addrs...))
	}
	t.Cleanup(func() {
		defer func() { _ = env.Client.CoreV1().Namespaces().Delete(ctx(t), hostileNS, metav1.DeleteOptions{}) }()
		_ = env.Client.DiscoveryV1().EndpointSlices(hostileNS).DeleteCollection(ctx(t), metav1.DeleteOptions{}, metav1.ListOptions{})
		list, err := env.Client.CoreV1().Services(hostileNS).List(ctx(t), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, s := range list.Items {
			_ = env.Client.CoreV1().Services(hostileNS).Delete(ctx(t), s.Name, metav1.DeleteOptions{})
		}
	})
	// One revision per object, as API writes are: a watch the API server
	// ends (this flood overruns a watcher's buffer) resumes after the last
	// revision it delivered, so objects sharing one would be skipped.
	for _, o := range objs {
		if err := env.StoreDirect(ctx(t), []kubeenv.StoredObject{o}); err != nil {
			t.Fatal(err)
		}
	}

	fe := func(ip string) model.Frontend {
		return model.Frontend{Addr: netip.MustParseAddr(ip), Port: 80, Proto: model.TCP}
	}
	var got map[model.Frontend][]model.Backend
	missing := 0
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, missing = programmed(t, a.pins), 0
		var which []string
		for i := range valid {
			if bs := got[fe(validIP(i))]; len(bs) != 1 || bs[0].Addr != netip.MustParseAddr(backend(i)) {
				missing++
				which = append(which, fmt.Sprintf("v%d: %v", i, bs))
			}
		}
		if time.Now().After(deadline) {
			t.Logf("not as they are: %v", which)
		}
		if missing == 0 && len(got[fe("10.98.200.1")]) == 10000 {
			break
		}
		if time.Now().After(deadline) {
			list, err := env.Client.DiscoveryV1().EndpointSlices(hostileNS).List(ctx(t), metav1.ListOptions{})
			if err == nil {
				n := 0
				for _, s := range list.Items {
					if strings.HasPrefix(s.Name, "big-") {
						n++
					}
				}
				t.Logf("the API lists %d slices, %d of the big Service's", len(list.Items), n)
			}
			t.Fatalf("after 60s: %d of %d valid Services not programmed as they are; the big one has %d of 10,000 backends",
				missing, valid, len(got[fe("10.98.200.1")]))
		}
		time.Sleep(100 * time.Millisecond)
	}
	huge := 0
	for f := range got {
		switch {
		case f.Addr == netip.MustParseAddr("10.99.7.7"):
			huge++
		case strings.HasPrefix(f.Addr.String(), "10.99."):
			t.Errorf("frontend %v of a Service with nothing valid programmed", f)
		}
	}
	if huge != 1614 { // its valid ports: the rest applied
		t.Errorf("the Service of 2,000 ports has %d frontends, want its 1,614 valid ports", huge)
	}
	for reason, want := range map[string]int{"InvalidField": invalid, "FrontendConflict": conflicts} {
		var n float64
		testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d %s problems counted", want, reason), func() bool {
			line := grep(a.get("/metrics", a.metrics), `netcube_config_problems{reason="`+reason+`"}`)
			_, err := fmt.Sscanf(line, `netcube_config_problems{reason="`+reason+`"} %g`, &n)
			return err == nil && int(n) == want
		})
	}
	// An Event names one object of each kind (the queue drops some of a
	// thousand: every one is logged and counted).
	for _, e := range []struct{ kind, name, reason, says string }{
		{"Service", "bad0", "InvalidField", `spec.clusterIPs[0]: "10.99.0.300" is not an IP address`},
		{"Service", "bad1", "InvalidField", "spec.ports[0].port: 70000 is not in 1-65535"},
		{"Service", "bad2", "InvalidField", `spec.ports[0].protocol: "FOO" is not supported`},
		{"Service", "bad3", "FrontendConflict", "v3"},
		{"EndpointSlice", "bad4", "InvalidField", `"10.244.50.999" is not an IPv4 address`},
		{"EndpointSlice", "bad5", "InvalidField", "ports[0].port: 70000 is not in 1-65535"},
		{"EndpointSlice", "bad6", "InvalidField", "belongs to no Service"},
		{"Service", "bad7", "InvalidField", "spec.ports[1614].port: 65560 is not in 1-65535"},
		{"Service", "bad15", "InvalidField", `spec.ports[0].protocol: "ICMP" is not supported`},
	} {
		if msg := eventFor(t, hostileNS, e.kind, e.name, e.reason); !strings.Contains(msg, e.says) {
			t.Errorf("%s %s: event %q does not say %q", e.kind, e.name, msg, e.says)
		}
	}
	cpu, rss := procUsage(a.cmd.Process.Pid)
	t.Logf("agent: %.1f CPU seconds, peak RSS %.0f MB", cpu, rss)
	if rss > 300 {
		t.Errorf("agent's peak RSS %.0f MB with 1,200 objects and 10,000 endpoints: not bounded", rss)
	}
}

// procUsage returns a process's CPU seconds and peak RSS (MiB).
func procUsage(pid int) (cpu, rssMB float64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		for _, i := range []int{11, 12} { // utime stime
			v, _ := strconv.ParseFloat(f[i], 64)
			cpu += v / 100 // USER_HZ
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				rssMB = kb / 1024
			}
		}
	}
	return cpu, rssMB
}

// TestMapFullFromTheAPI: a Service with more backends than the service
// map has room for is a clear error (a MapFull Event naming the map and
// its size flag, and counted), the Services already programmed stay as
// they are, and it goes in by itself once room returns (other Services
// deleted).
func TestMapFullFromTheAPI(t *testing.T) {
	a := startAgent(t, pinDir(t), "--lb-service-map-size", "40")
	const ns = "mapfull"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	t.Cleanup(func() {
		for _, n := range names {
			_ = env.Client.CoreV1().Services(ns).Delete(ctx(t), n, metav1.DeleteOptions{})
			_ = env.Client.DiscoveryV1().EndpointSlices(ns).Delete(ctx(t), n+"-1", metav1.DeleteOptions{})
		}
		_ = env.Client.CoreV1().Namespaces().Delete(ctx(t), ns, metav1.DeleteOptions{})
	})
	create := func(name, ip string, backends int) {
		t.Helper()
		names = append(names, name)
		var addrs []string
		for i := range backends {
			addrs = append(addrs, fmt.Sprintf("10.244.60.%d", i+1))
		}
		if _, err := env.Client.CoreV1().Services(ns).Create(ctx(t), serviceIn(ns, name, ip, time.Now()), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx(t), sliceIn(ns, name+"-1", name, 8080, addrs...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fe := func(ip string) model.Frontend {
		return model.Frontend{Addr: netip.MustParseAddr(ip), Port: 80, Proto: model.TCP}
	}
	// Five small Services: 2 entries each (the frontend and one backend
	// slot); the kubernetes Service has its own.
	for i := range 5 {
		create(fmt.Sprintf("small%d", i), fmt.Sprintf("10.96.150.%d", i+1), 1)
	}
	testenv.WaitFor(t, 10*time.Second, "the small Services programmed", func() bool {
		got := programmed(t, a.pins)
		for i := range 5 {
			if len(got[fe(fmt.Sprintf("10.96.150.%d", i+1))]) != 1 {
				return false
			}
		}
		return true
	})
	create("big", "10.96.150.100", 30) // 31 entries: more than is left
	msg := eventFor(t, ns, "Service", "big", "MapFull")
	for _, want := range []string{"lb_services", "--lb-service-map-size"} {
		if !strings.Contains(msg, want) {
			t.Errorf("event %q does not name %q", msg, want)
		}
	}
	if m := grep(a.get("/metrics", a.metrics), `netcube_config_problems{reason="MapFull"}`); !strings.HasSuffix(m, " 1") {
		t.Errorf("MapFull not counted: %q", m)
	}
	got := programmed(t, a.pins)
	if len(got[fe("10.96.150.100")]) != 0 {
		t.Errorf("the Service that does not fit is programmed in part: %v", got[fe("10.96.150.100")])
	}
	for i := range 5 {
		if len(got[fe(fmt.Sprintf("10.96.150.%d", i+1))]) != 1 {
			t.Errorf("small%d disturbed: %v", i, got[fe(fmt.Sprintf("10.96.150.%d", i+1))])
		}
	}
	// Room returns: the big one goes in by itself, and the problem clears.
	for i := range 3 {
		if err := env.Client.CoreV1().Services(ns).Delete(ctx(t), fmt.Sprintf("small%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	roomBack := time.Now()
	testenv.WaitFor(t, 30*time.Second, "the big Service programmed once there is room", func() bool {
		return len(programmed(t, a.pins)[fe("10.96.150.100")]) == 30
	})
	faultrec.Write(t, faultrec.Record{Fault: "lb_services full: a Service of 30 endpoints refused, then room returns", Path: "API",
		ConvergeSeconds: time.Since(roomBack).Seconds(), Note: "the 5 programmed Services untouched; MapFull Event and metric"})
	testenv.WaitFor(t, 5*time.Second, "MapFull cleared", func() bool {
		return strings.HasSuffix(grep(a.get("/metrics", a.metrics), `netcube_config_problems{reason="MapFull"}`), " 0")
	})
}
